"""The front-end routes in process, no runner started: the per-user limits of the one submit path
(429 and Retry-After before any stream), the thread a turn lands in, 501 and the W002 check
without ag-ui-protocol, refusals before a stream opens."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import checks
from django.test import AsyncClient
from django.urls import reverse

from responses_app import checks as relay_checks
from responses_app.models import Conversation, ResponseRequest
from responses_app.web import frontend_streams

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def owner(transactional_db: Any) -> Any:  # committed: the views read it from other threads
    return get_user_model().objects.create_user("owner", password="pw")


@pytest.fixture
def teammate(transactional_db: Any) -> Any:
    return get_user_model().objects.create_user("teammate", password="pw")


@pytest.fixture
def front(no_upstream: list[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    async def fake_start(request_id: str) -> None:
        no_upstream.append(request_id)

    monkeypatch.setattr(frontend_streams, "start_request", fake_start)
    return no_upstream


def agui_body(thread_id: str, text: str = "Hi") -> dict[str, Any]:
    return {"threadId": thread_id, "runId": str(uuid.uuid4()), "forwardedProps": {"model": "sim-text"},
            "messages": [{"id": "1", "role": "user", "content": text}]}


async def signed_in(user: Any) -> AsyncClient:
    """A session client (the test client passes CSRF; the live tests check it, and bearer tokens)."""
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def test_limits_of_the_submit_path_refuse_before_any_stream(front: list[str], settings: Any, owner: Any) -> None:
    settings.RELAY_MAX_CONCURRENT_PER_USER = 1
    client = await signed_in(owner)
    first = await client.post(reverse("responses_app:agui-run"), agui_body("t1"), content_type="application/json")
    assert first.status_code == 200 and first.streaming and len(front) == 1
    refused = await client.post(reverse("responses_app:aisdk-chat"), {"id": "c1", "messages": [
        {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}]}, content_type="application/json")
    assert refused.status_code == 429 and refused["Retry-After"] and refused.json()["code"] == \
        "too_many_requests_in_flight"
    assert await ResponseRequest.objects.acount() == 1 and len(front) == 1


async def test_a_thread_is_one_conversation_of_its_user(front: list[str], owner: Any) -> None:
    client = await signed_in(owner)
    for _ in range(2):
        response = await client.post(reverse("responses_app:agui-run"), agui_body("my-thread"),
                                     content_type="application/json")
        assert response.status_code == 200
    conversation = await Conversation.objects.aget(owner=owner)
    assert await conversation.requests.acount() == 2
    mine = str(uuid.uuid4())
    await client.post(reverse("responses_app:agui-run"), agui_body(mine), content_type="application/json")
    assert await Conversation.objects.filter(pk=mine, owner=owner).aexists()


async def test_another_users_conversation_is_not_a_thread(front: list[str], owner: Any, teammate: Any) -> None:
    theirs = await Conversation.objects.acreate(owner=teammate)
    response = await (await signed_in(owner)).post(reverse("responses_app:agui-run"), agui_body(str(theirs.pk)),
                                                    content_type="application/json")
    assert response.status_code == 404 and await ResponseRequest.objects.acount() == 0


async def test_refusals_before_a_stream(front: list[str], owner: Any) -> None:
    client = await signed_in(owner)
    assert (await client.get(reverse("responses_app:agui-run"))).status_code == 405
    run = reverse("responses_app:agui-run")
    assert (await client.post(run, b"[", content_type="application/json")).status_code == 400
    assert (await client.post(reverse("responses_app:agui-run"), agui_body("t", text=""),
                              content_type="application/json")).status_code == 400
    chat = reverse("responses_app:aisdk-chat")
    assert (await client.post(chat, {"id": "c"}, content_type="application/json")).status_code == 400
    assert (await client.get(reverse("responses_app:aisdk-stream", args=["nothing-here"]))).status_code == 204
    anonymous = await AsyncClient().post(reverse("responses_app:aisdk-chat"), {}, content_type="application/json")
    assert anonymous.status_code == 401


async def test_without_ag_ui_the_routes_answer_501(front: list[str], monkeypatch: pytest.MonkeyPatch,
                                                  owner: Any) -> None:
    monkeypatch.setattr(frontend_streams, "agui", None)
    response = await (await signed_in(owner)).post(reverse("responses_app:agui-run"), agui_body("t"),
                                                    content_type="application/json")
    assert response.status_code == 501 and "ag-ui-protocol" in response.json()["error"]


def test_a_check_warns_without_ag_ui(monkeypatch: pytest.MonkeyPatch) -> None:
    assert relay_checks.agui_check() == []
    monkeypatch.setattr(relay_checks.importlib.util, "find_spec", lambda name: None)
    (warning,) = relay_checks.agui_check()
    assert warning.id == "responses_app.W002" and warning.level == checks.WARNING


@pytest.mark.parametrize(("value", "deploy", "found"), [
    ("alice=short", False, []),
    ("alice=short", True, ["responses_app.E013"]),
    ("alice", False, ["responses_app.E002"]),
    ("=token-0123456789abcdef0123456789abcdef", False, ["responses_app.E002"]),
])
def test_api_tokens_are_read_strictly(value: str, deploy: bool, found: list[str], settings: Any) -> None:
    settings.RELAY_API_TOKENS = value
    settings.RELAY_UPSTREAM_API_KEY, settings.RELAY_ALLOWED_MODELS = "sk-test", ["gpt-4.1-mini"]
    errors = [m.id for m in checks.run_checks(tags=["responses_app"], include_deployment_checks=deploy)
              if m.is_serious()]
    assert errors == found

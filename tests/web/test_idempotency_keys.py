"""Idempotency keys made of a client's own ids are digests of the whole ids, never a prefix: two
messages of a long AI SDK chat, two AG-UI runs with long ids, two regenerations with long form
keys are two requests each; the same message sent twice is still one. No upstream: starts are
recorded, not run."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import AsyncClient
from django.urls import reverse

from responses_app.idempotency import KEY_MAX, client_key, fitted
from responses_app.models import ResponseRequest
from responses_app.web import frontend_streams
from tests.web.test_conversation_actions import add_turn, complete
from tests.web.test_pages import client_for, make_turn


@pytest.fixture
def owner(transactional_db: Any) -> Any:  # committed: the async views read it from other threads
    return get_user_model().objects.create_user("owner", password="pw")


@pytest.fixture
def front(no_upstream: list[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    async def fake_start(request_id: str) -> None:
        no_upstream.append(request_id)

    monkeypatch.setattr(frontend_streams, "start_request", fake_start)
    return no_upstream


def chat(chat_id: str, message_id: str) -> dict[str, Any]:
    return {"id": chat_id, "model": "sim-text",
            "messages": [{"id": message_id, "role": "user", "parts": [{"type": "text", "text": "Hi"}]}]}


async def test_two_messages_of_a_long_ai_sdk_chat_are_two_requests(front: list[str], owner: Any) -> None:
    client = AsyncClient()
    await client.aforce_login(owner)
    chat_id = "c" * 95
    ids = []
    for message_id in ("m1", "m2", "m2"):
        response = await client.post(reverse("responses_app:aisdk-chat"), chat(chat_id, message_id),
                                     content_type="application/json")
        assert response.status_code == 200
        ids.append(response["X-Relay-Request-Id"])
    assert ids[0] != ids[1], "the second message is a request of its own"
    assert ids[1] == ids[2], "the same message again is the same request"
    assert await ResponseRequest.objects.acount() == 2


async def test_two_agui_runs_with_long_ids_are_two_requests(front: list[str], owner: Any) -> None:
    client = AsyncClient()
    await client.aforce_login(owner)
    ids = set()
    for run_id in ("r" * 120 + "1", "r" * 120 + "2"):
        body = {"threadId": "t", "runId": run_id, "forwardedProps": {"model": "sim-text"},
                "messages": [{"id": "1", "role": "user", "content": "Hi"}]}
        response = await client.post(reverse("responses_app:agui-run"), body, content_type="application/json")
        assert response.status_code == 200
        ids.add(response["X-Relay-Request-Id"])
    assert len(ids) == 2 and await ResponseRequest.objects.acount() == 2


def test_two_regenerations_with_long_keys_are_two_requests(owner: Any, no_upstream: list[str]) -> None:
    first = make_turn(owner, prompt="One")
    complete(first, "resp_one")
    second = add_turn(first.conversation, owner, "Two", "resp_two")  # type: ignore[arg-type]
    url = reverse("responses_app:chat-regenerate", args=[first.conversation_id, second.pk])
    made = [client_for(owner).post(url, {"client_request_id": "k" * 150 + end}, HTTP_ACCEPT="application/json")
            for end in ("a", "b", "b")]
    assert [r.status_code for r in made] == [201, 201, 200]
    assert made[0].json()["id"] != made[1].json()["id"] == made[2].json()["id"]


def test_keys_fit_the_column_and_never_collide_by_their_parts() -> None:
    assert client_key("aisdk", "a:b", "c") != client_key("aisdk", "a", "b:c")
    assert len(client_key("aisdk", "x" * 10_000, "\ud800")) <= KEY_MAX
    assert fitted("short") == "short"
    assert fitted("k" * 150 + "a") != fitted("k" * 150 + "b") and len(fitted("k" * 500)) <= KEY_MAX

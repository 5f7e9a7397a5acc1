"""U+0000 in any user text that reaches PostgreSQL (which refuses it in text) is never a 500: the
search query, a share token, an AI SDK stream key, an approval id, a conversation's title and an
idempotency key are a clear 4xx; AG-UI thread and run ids and AI SDK chat ids are opaque and
digested, so a NUL in one never reaches a column. (A share's `turn` that is no request id at all is
the share view's own bad-id case, not tested here.) On SQLite too (which takes it): the answers are
the same. Run with DATABASE_URL=postgres://... for the case that broke."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from responses_app.models import ResponseRequest
from tests.web.test_pages import make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]
NUL = "a\x00b"


@pytest.fixture
def client(owner: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    return client


def test_gets_with_a_nul(client: Client, owner: Any) -> None:
    turn = make_turn(owner)
    urls = [reverse("responses_app:search") + "?q=%00", "/s/a%00b/", f"/s/a%00b/turns/{turn.pk}/",
            reverse("responses_app:aisdk-stream", args=["x"]).replace("/x/", "/a%00b/"),
            reverse("responses_app:agui-stream", args=[turn.pk]) + "?thread_id=%00&run_id=%00"]
    answers = {url: client.get(url).status_code for url in urls}
    assert all(400 <= status < 500 or status in (200, 204) for status in answers.values()), answers


def test_posts_with_a_nul(client: Client, owner: Any) -> None:
    turn = make_turn(owner)
    before = ResponseRequest.objects.count()
    approval = reverse("responses_app:api-request-approve", args=[turn.pk, "x"]).replace("/x", "/a%00b")
    answers = {
        "approval": client.post(approval, {"approve": "true"}).status_code,
        "rename": client.post(reverse("responses_app:conversation-rename", args=[turn.conversation_id]),
                              {"title": NUL}).status_code,
        "api key": client.post(reverse("responses_app:api-requests"), {"input": "hi", "model": "sim-text",
                                                                       "client_request_id": NUL}).status_code,
        "agui": client.post(reverse("responses_app:agui-run"), {
            "threadId": NUL, "runId": NUL, "state": {}, "tools": [], "context": [], "forwardedProps": {},
            "messages": [{"id": NUL, "role": "user", "content": "hi"}]}, content_type="application/json").status_code,
        "aisdk": client.post(reverse("responses_app:aisdk-chat"), {
            "id": NUL, "messages": [{"id": NUL, "role": "user", "parts": [{"type": "text", "text": "hi"}]}]},
            content_type="application/json").status_code,
    }
    refused = {k: answers.pop(k) for k in ("approval", "rename", "api key")}
    assert all(400 <= status < 500 for status in refused.values()), refused
    # The front ends' ids are opaque: digested into keys and thread ids (idempotency.py,
    # selectors.thread_conversation_id), so a NUL in one starts a turn and never reaches a column.
    assert all(status < 500 for status in answers.values()), answers
    started = ResponseRequest.objects.exclude(pk=turn.pk)
    assert started.count() - (before - 1) == sum(status == 200 for status in answers.values())
    assert not any("\x00" in (r.client_request_id or "") for r in started)
    assert uuid.UUID(str(turn.pk))

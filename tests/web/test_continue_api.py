"""Continue through the JSON API, in process (no upstream: starting a runner is recorded, not run):
POST api/requests/<id>/continue starts the continuation through the one door, with the JSON API's
authentication, CSRF and idempotency; refusals say why (continuing.refusal's words); the request's
JSON names the answer it goes on from; a continuation is counted once."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from responses_app import continuing
from responses_app.models import ResponseRequest
from responses_app.ops import analytics
from tests.web.test_continue import stopped_turn
from tests.web.test_pages import client_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]


def continue_url(request: ResponseRequest | uuid.UUID) -> str:
    return reverse("responses_app:api-request-continue", args=[getattr(request, "pk", request)])


def test_the_owner_continues_and_a_resubmit_finds_the_same_continuation(owner: Any, no_upstream: list[str]) -> None:
    turn = stopped_turn(owner)
    client = client_for(owner)
    key = str(uuid.uuid4())
    made = client.post(continue_url(turn), {"client_request_id": key}, content_type="application/json")
    assert made.status_code == 201, made.content
    body = made.json()
    part = ResponseRequest.objects.get(pk=body["id"])
    assert body["continues"] == str(turn.pk) and body["conversation"] == str(turn.conversation_id)
    assert body["status"] == "pending" and body["ws_url"].endswith(f"{part.pk}/")
    assert part.continues_id == turn.pk and part.input == continuing.INSTRUCTION and part.client_request_id == key
    assert part.params["previous_response_id"] == "resp_first", "chained to the cut-short response"
    assert no_upstream == [str(part.pk)], "its runner was started"
    again = client.post(continue_url(turn), {"client_request_id": key}, content_type="application/json")
    assert again.status_code == 200 and again.json()["id"] == body["id"]
    detail = client.get(reverse("responses_app:api-request", args=[part.pk])).json()
    assert detail["continues"] == str(turn.pk)
    assert client.get(reverse("responses_app:api-request", args=[turn.pk])).json()["continues"] is None
    data = analytics.summary(analytics.DateRange.last_days(1))
    assert data["total"] == 2, "the turn and its continuation, each counted once"


def test_an_empty_body_continues_a_stopped_answer_from_the_branch(owner: Any) -> None:
    turn = stopped_turn(owner, status="cancelled")
    made = client_for(owner).post(continue_url(turn))
    assert made.status_code == 201
    part = ResponseRequest.objects.get(pk=made.json()["id"])
    assert part.params.get("full_context") is True and "previous_response_id" not in part.params


@pytest.mark.parametrize(("status", "words"), [("completed", continuing.NOT_STOPPED),
                                               ("streaming", continuing.STILL_RUNNING)])
def test_an_answer_that_cannot_go_on_is_409_saying_why(owner: Any, status: str, words: str) -> None:
    turn = stopped_turn(owner, status=status)
    refused = client_for(owner).post(continue_url(turn), content_type="application/json")
    assert refused.status_code == 409
    assert refused.json() == {"error": words, "code": "not_continuable"}
    assert ResponseRequest.objects.count() == 1


def test_only_the_last_answer_goes_on(owner: Any) -> None:
    turn = stopped_turn(owner)
    client = client_for(owner)
    assert client.post(continue_url(turn)).status_code == 201
    refused = client.post(continue_url(turn))
    assert refused.status_code == 409 and refused.json()["error"] == continuing.NOT_LAST


def test_who_may_continue(owner: Any, outsider: Any, staff: Any) -> None:
    turn = stopped_turn(owner)
    assert Client().post(continue_url(turn)).status_code == 401
    assert client_for(outsider).post(continue_url(turn)).status_code == 404, "not yours: as if it were not there"
    assert client_for(owner).post(continue_url(uuid.uuid4())).status_code == 404
    seen = client_for(staff).post(continue_url(turn))
    assert seen.status_code == 403 and seen.json()["error"] == continuing.NOT_OWNER, "who may read it may not go on"
    csrf = client_for(owner, enforce_csrf_checks=True).post(continue_url(turn))
    assert csrf.status_code == 403, "a session needs its CSRF token, as api/requests does"
    assert client_for(owner).get(continue_url(turn)).status_code == 405
    assert ResponseRequest.objects.count() == 1


@pytest.mark.parametrize("body", [b"not json", b"[1]", b'{"client_request_id": 5}'])
def test_a_bad_body_is_400(owner: Any, body: bytes) -> None:
    turn = stopped_turn(owner)
    refused = client_for(owner).post(continue_url(turn), body, content_type="application/json")
    assert refused.status_code == 400 and refused.json()["error"]

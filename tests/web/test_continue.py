"""Continue and Regenerate with another model, through the pages: who may continue which answer
(the owner, the last answer, one that was stopped or cut short: refusals say why), the turn shown
as one answer with its continuation (page, partial, branch ids, search, exports, shared page), and
Regenerate's model choice. No upstream: starting a runner is recorded, not run."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import Client
from django.urls import reverse

from responses_app import branches, continuing, search, selectors, services, shares
from responses_app.models import Checkpoint, ResponseRequest
from responses_app.ops import analytics
from responses_app.web import export, model_choices
from tests.web.test_pages import client_for, make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]

FIRST = "The river runs down to the"
REST = " sea, and the sea is never full."


def continue_url(request: ResponseRequest) -> str:
    return reverse("responses_app:chat-continue", args=[request.conversation_id, request.pk])


def stopped_turn(owner: Any, status: str = "incomplete", text: str = FIRST) -> ResponseRequest:
    turn = make_turn(owner, text=text, status=status, prompt="Tell me about rivers")
    reason = "max_output_tokens" if status == "incomplete" else ""
    ResponseRequest.objects.filter(pk=turn.pk).update(final_text=text, response_id="resp_first",
                                                      incomplete_reason=reason)
    return ResponseRequest.objects.get(pk=turn.pk)


def continued(owner: Any, client: Client, turn: ResponseRequest, rest: str = REST,
              status: str = "completed") -> ResponseRequest:
    """Continue `turn` through the page, then end the continuation with `rest` as its answer."""
    response = client.post(continue_url(turn), {"client_request_id": str(uuid.uuid4())})
    assert response.status_code == 302, response.content
    part = ResponseRequest.objects.get(continues=turn)
    assert response["Location"].endswith(f"#turn-{continuing.turn_of(part).head.pk}")
    ResponseRequest.objects.filter(pk=part.pk).update(status=status, final_text=rest, response_id=f"resp_{part.pk.hex}")
    Checkpoint.objects.create(request=part, revision=3, sequence_number=9, reason="terminal", view={
        "revision": 3, "meta": {"status": status},
        "blocks": [{"id": "o0-c0", "kind": "text", "item_id": f"msg_{part.pk.hex}", "state": "done",
                    "annotations": [], "text": rest}]})
    return ResponseRequest.objects.get(pk=part.pk)


# --- who may continue which answer ------------------------------------------------------------------

def test_the_owner_continues_a_cut_short_answer_chained_to_it(owner: Any, no_upstream: list[str]) -> None:
    turn = stopped_turn(owner)
    client = client_for(owner)
    key = str(uuid.uuid4())
    response = client.post(continue_url(turn), {"client_request_id": key})
    assert response.status_code == 302
    part = ResponseRequest.objects.get(client_request_id=key)
    assert part.continues_id == turn.pk and part.parent_id == turn.pk and part.model == turn.model
    assert part.input == continuing.INSTRUCTION
    assert part.params["previous_response_id"] == "resp_first" and "full_context" not in part.params
    assert no_upstream == [str(part.pk)], "its runner was started"
    assert client.post(continue_url(turn), {"client_request_id": key}).status_code == 302, "a resubmit finds it"
    assert ResponseRequest.objects.filter(continues=turn).count() == 1


def test_a_stopped_answer_is_continued_from_the_branch_as_input(owner: Any) -> None:
    turn = stopped_turn(owner, status="cancelled")
    response = client_for(owner).post(continue_url(turn), HTTP_ACCEPT="application/json")
    assert response.status_code == 201
    body = response.json()
    part = ResponseRequest.objects.get(pk=body["id"])
    assert body["turn"] == str(turn.pk)
    assert part.params.get("full_context") is True and "previous_response_id" not in part.params


@pytest.mark.parametrize("status", ["completed", "failed", "error"])
def test_an_answer_that_ended_otherwise_is_not_continued_and_says_why(owner: Any, status: str) -> None:
    turn = stopped_turn(owner, status=status)
    client = client_for(owner)
    response = client.post(continue_url(turn))
    assert response.status_code == 409
    assert continuing.NOT_STOPPED in response.content.decode()
    json_answer = client.post(continue_url(turn), HTTP_ACCEPT="application/json")
    assert json_answer.status_code == 409 and json_answer.json()["error"] == continuing.NOT_STOPPED
    assert not ResponseRequest.objects.filter(continues=turn).exists()


def test_a_running_answer_is_not_continued(owner: Any) -> None:
    turn = stopped_turn(owner, status="streaming")
    response = client_for(owner).post(continue_url(turn), HTTP_ACCEPT="application/json")
    assert response.status_code == 409 and response.json()["error"] == continuing.STILL_RUNNING


def test_only_the_last_answer_is_continued(owner: Any) -> None:
    turn = stopped_turn(owner)
    conversation = turn.conversation
    services.request_create(owner=owner, input="And lakes?", model="sim-text", client_request_id=str(uuid.uuid4()),
                            conversation=conversation)
    response = client_for(owner).post(continue_url(turn))
    assert response.status_code == 409 and continuing.NOT_LAST in response.content.decode()
    assert not ResponseRequest.objects.filter(continues=turn).exists()


def test_only_the_owner_continues(owner: Any, staff: Any, teammate: Any) -> None:
    turn = stopped_turn(owner)
    seen = client_for(staff).post(continue_url(turn))
    assert seen.status_code == 403 and continuing.NOT_OWNER in seen.content.decode()
    assert client_for(teammate).post(continue_url(turn)).status_code == 404, "nothing to see for others"
    assert Client().post(continue_url(turn)).status_code == 302, "to the login page"
    assert not ResponseRequest.objects.filter(continues=turn).exists()


def test_continue_is_offered_on_the_owner_s_last_stopped_answer_only(owner: Any, staff: Any) -> None:
    stopped = stopped_turn(owner)
    page = client_for(owner).get(reverse("responses_app:chat", args=[stopped.conversation_id])).content.decode()
    assert continue_url(stopped) in page and "continue-form" in page
    assert 'class="continue-form' not in client_for(staff).get(
        reverse("responses_app:chat", args=[stopped.conversation_id])).content.decode()
    done = stopped_turn(owner, status="completed")
    assert "continue-form" not in client_for(owner).get(
        reverse("responses_app:chat", args=[done.conversation_id])).content.decode()


# --- one turn, one answer --------------------------------------------------------------------------

def test_the_page_shows_the_continuation_in_the_same_answer(owner: Any) -> None:
    turn = stopped_turn(owner)
    client = client_for(owner)
    part = continued(owner, client, turn)
    page = client.get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    assert page.count('<article class="turn') == 1
    assert f'id="turn-{turn.pk}"' in page and f'data-request-id="{part.pk}"' in page
    assert FIRST + REST in page, "one answer text"
    assert continuing.INSTRUCTION not in page, "the instruction is not a prompt of the page"
    assert "continue-form" not in page, "a completed continuation has nothing to continue"
    partial = client.get(reverse("responses_app:chat-turn", args=[turn.conversation_id, part.pk])).content.decode()
    assert f'id="turn-{turn.pk}"' in partial and FIRST + REST in partial
    assert selectors.conversation_turn_ids(conversation_id=turn.conversation_id) == [str(turn.pk)]


def test_a_live_continuation_is_written_below_the_answer_so_far(owner: Any) -> None:
    turn = stopped_turn(owner)
    client = client_for(owner)
    client.post(continue_url(turn))
    part = ResponseRequest.objects.get(continues=turn)
    page = client.get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    assert "data-earlier" in page and FIRST in page and 'data-live="1"' in page
    assert f'data-request-id="{part.pk}"' in page


def test_continuing_again_chains_the_parts_of_one_answer(owner: Any) -> None:
    turn = stopped_turn(owner)
    client = client_for(owner)
    second = continued(owner, client, turn, rest=" sea, and", status="incomplete")
    page = client.get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    assert continue_url(second) in page, "the last part is continued"
    third = continued(owner, client, second, rest=" the sea is never full.")
    assert third.params["previous_response_id"] == second.response_id
    (shown,) = continuing.conversation_turns(conversation=turn.conversation)
    assert shown.text == FIRST + " sea, and the sea is never full."
    assert [p.pk for p in shown.parts] == [turn.pk, second.pk, third.pk]


def test_each_part_is_counted_once_as_the_request_it_is(owner: Any) -> None:
    turn = stopped_turn(owner)
    continued(owner, client_for(owner), turn)
    data = analytics.summary(analytics.DateRange.last_days(1))
    assert data["total"] == 2 and dict(data["by_status"]) == {"incomplete": 1, "completed": 1}


def test_search_exports_and_the_shared_page_read_the_joined_answer(owner: Any, settings: Any) -> None:
    turn = stopped_turn(owner)
    client = client_for(owner)
    part = continued(owner, client, turn)
    page = client.get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    assert f'<option value="{turn.pk}">' in page and f'<option value="{part.pk}">' not in page, "a turn is shared whole"
    hits = search.search_turns(user=owner, query="never full")
    assert [hit.request_id for hit in hits] == [turn.pk], "a hit on the rest names the turn"
    assert "river runs" in str(hits[0].answer) and "Tell me about rivers" in str(hits[0].prompt)
    markdown = export.conversation_markdown(turn.conversation)
    assert FIRST + REST in markdown and continuing.INSTRUCTION not in markdown
    data = export.conversation_json(turn.conversation)
    assert len(data["turns"]) == 1 and data["turns"][0]["answer"] == FIRST + REST
    settings.RELAY_SHARE_ANONYMOUS = True
    share = shares.share_create(conversation=turn.conversation, request=turn, user=owner, anonymous=True)
    shared = Client().get(reverse("responses_app:shared", args=[share.token])).content.decode()
    assert FIRST + REST in shared
    assert selectors.request_for_viewer(user=AnonymousUser(), request_id=part.pk, share=share.token) == part, \
        "the turn's link follows its continuation"


def test_regenerating_a_continued_turn_makes_a_version_of_the_whole_turn(owner: Any) -> None:
    turn = stopped_turn(owner)
    client = client_for(owner)
    continued(owner, client, turn)
    regenerate = reverse("responses_app:chat-regenerate", args=[turn.conversation_id, turn.pk])
    assert client.post(regenerate, {"client_request_id": str(uuid.uuid4())}).status_code == 302
    newest = ResponseRequest.objects.filter(conversation=turn.conversation).order_by("-created").first()
    assert newest.input == turn.input and newest.parent_id is None and newest.continues_id is None
    assert branches.versions_of(newest).count == 2


# --- Regenerate with another model ------------------------------------------------------------------

def test_regenerate_with_another_model_makes_a_new_version_with_it(owner: Any) -> None:
    turn = make_turn(owner)
    client = client_for(owner)
    page = client.get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    assert 'name="model" value="sim-long"' in page
    assert model_choices.BUILT_IN["sim-reasoning"] in page, "each model with what it does"
    regenerate = reverse("responses_app:chat-regenerate", args=[turn.conversation_id, turn.pk])
    response = client.post(regenerate, {"client_request_id": str(uuid.uuid4()), "model": "sim-reasoning"},
                           HTTP_ACCEPT="application/json")
    assert response.status_code == 201
    new = ResponseRequest.objects.get(pk=response.json()["id"])
    assert new.model == "sim-reasoning" and new.input == turn.input and new.parent_id == turn.parent_id
    assert branches.versions_of(new).count == 2


def test_regenerate_refuses_a_model_this_server_does_not_offer(owner: Any, settings: Any) -> None:
    settings.RELAY_ALLOWED_MODELS = ["sim-text", "sim-long"]
    turn = make_turn(owner)
    client = client_for(owner)
    page = client.get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    assert 'value="sim-long"' in page and 'value="sim-reasoning"' not in page, "the composer's models only"
    regenerate = reverse("responses_app:chat-regenerate", args=[turn.conversation_id, turn.pk])
    response = client.post(regenerate, {"client_request_id": str(uuid.uuid4()), "model": "sim-reasoning"})
    assert response.status_code == 400
    assert ResponseRequest.objects.filter(conversation=turn.conversation).count() == 1


def test_model_descriptions_come_from_the_upstream_s_listing_when_it_has_them() -> None:
    model_choices.remember([{"id": "acme-1", "description": "Fast and small. Faults via metadata: x."},
                            {"id": "acme-2"}], 60)
    assert model_choices.choices(["acme-1", "acme-2", "sim-text"]) == [
        ("acme-1", "Fast and small."), ("acme-2", ""), ("sim-text", model_choices.BUILT_IN["sim-text"])]
    assert json.dumps(model_choices.short("x" * 200)).count("x") == model_choices.MAX_CHARS - 1

"""Continue a shared conversation (shares.share_continue): a signed-in visitor's POST on the shared
page copies the turns the link shows, as text, into a new conversation of theirs and opens it. The
copy chains to nothing of the owner's: its next request sends the copied turns as input and no
`previous_response_id`. A visitor who is not signed in logs in first; a revoked link copies
nothing; copies are never counted as requests. No upstream: starting a runner is recorded."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from responses_app import continuing, selectors, shares, submission
from responses_app.models import Checkpoint, Conversation, ResponseRequest
from responses_app.ops import analytics
from responses_app.relay.bodies import full_context_body
from tests.web.test_pages import client_for, make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]

TOOL = {"id": "fc", "kind": "tool", "tool": "function_call", "state": "completed", "name": "get_weather",
        "arguments": '{"city": "Oslo"}', "output": "rain"}
REASONING = {"id": "r0", "kind": "reasoning", "tool": "reasoning", "item_id": "r0", "state": "completed",
             "text": "thinking hard"}


def text_block(block_id: str, text: str) -> dict[str, Any]:
    return {"id": block_id, "kind": "text", "item_id": "msg_" + block_id, "state": "done", "annotations": [],
            "text": text}


def follow_up(parent: ResponseRequest, prompt: Any, blocks: list[dict[str, Any]], *, status: str = "completed",
              response_id: str = "resp_owner_2") -> ResponseRequest:
    turn = ResponseRequest.objects.create(
        owner=parent.owner, conversation=parent.conversation, parent=parent, client_request_id=str(uuid.uuid4()),
        model="sim-rich", input=prompt, status=status, response_id=response_id,
        final_text="\n\n".join(b["text"] for b in blocks if b["kind"] == "text"))
    Checkpoint.objects.create(request=turn, revision=len(blocks), reason="terminal",
                              view={"revision": len(blocks), "meta": {"status": status}, "blocks": blocks})
    Conversation.objects.filter(pk=parent.conversation_id).update(leaf=turn)
    return turn


@pytest.fixture
def shared(owner: Any) -> dict[str, Any]:
    """The owner's conversation of two turns on the branch shown (the second with a tool call, its
    reasoning and an image in its prompt), an older version of the second turn, and a link."""
    first = make_turn(owner, text="Rivers **flow**.", prompt="Tell me about rivers")
    ResponseRequest.objects.filter(pk=first.pk).update(response_id="resp_owner_1", final_text="Rivers **flow**.")
    Conversation.objects.filter(pk=first.conversation_id).update(title="Rivers", last_response_id="resp_owner_2")
    first.refresh_from_db()
    follow_up(first, "An older version", [text_block("old", "Old answer")], response_id="resp_owner_old")
    prompt = [{"role": "user", "content": [{"type": "input_text", "text": "And in Oslo?"},
                                           {"type": "input_image", "image_url": "https://example.com/a.png"}]}]
    second = follow_up(first, prompt, [REASONING, TOOL, text_block("a", "It rains in Oslo."),
                                       text_block("b", "Take a coat.")])
    share = shares.share_create(conversation=first.conversation, user=owner)  # type: ignore[arg-type]
    return {"first": first, "second": second, "share": share}


def continue_url(share: Any) -> str:
    return reverse("responses_app:shared-continue", args=[share.token])


def test_a_signed_in_visitor_continues_a_copy_of_the_turns_shown_as_text(shared: dict[str, Any],
                                                                      teammate: Any) -> None:
    client = client_for(teammate)
    page = client.get(reverse("responses_app:shared", args=[shared["share"].token])).content.decode()
    assert "Continue this conversation" in page and 'name="continue_id"' in page
    key = str(uuid.uuid4())
    response = client.post(continue_url(shared["share"]), {"continue_id": key})
    copy = Conversation.objects.get(owner=teammate)
    assert response.status_code == 302 and response["Location"] == reverse("responses_app:chat", args=[copy.pk])
    assert copy.title == "Rivers" and copy.last_response_id == ""
    turns = continuing.conversation_turns(conversation=copy)
    assert [(t.request.input, t.request.final_text, t.request.status, t.request.response_id, t.request.usage)
            for t in turns] == [
        ("Tell me about rivers", "Rivers **flow**.", "completed", "", None),
        ("And in Oslo?", "It rains in Oslo.\n\nTake a coat.", "completed", "", None),
    ], "the branch shown, text only: no image, no older version, no owner's response id"
    assert [t.request.copy_of for t in turns] == [shared["first"].pk, shared["second"].pk]
    assert [b["kind"] for b in turns[1].view["blocks"]] == ["text", "text"], "no reasoning, no tool call"
    html = client.get(response["Location"]).content.decode()
    assert "It rains in Oslo." in html and 'id="composer"' in html and "Tell me about rivers" in html
    assert "get_weather" not in html and "thinking hard" not in html
    again = client.post(continue_url(shared["share"]), {"continue_id": key})
    assert again["Location"] == response["Location"], "a resubmitted form finds its copy"
    assert Conversation.objects.filter(owner=teammate).count() == 1
    client.post(reverse("responses_app:conversation-delete", args=[copy.pk]))
    fresh = client.post(continue_url(shared["share"]), {"continue_id": key})
    assert fresh["Location"] != response["Location"], "the copy was deleted since: a new one"
    assert Conversation.objects.filter(owner=teammate, deleted_at=None).count() == 1
    owner_turns = ResponseRequest.objects.filter(conversation=shared["first"].conversation_id).count()
    assert owner_turns == 3, "the owner's conversation is untouched"


def test_the_copy_s_next_request_sends_its_turns_and_no_previous_response_id(shared: dict[str, Any],
                                                                             teammate: Any) -> None:
    client_for(teammate).post(continue_url(shared["share"]))
    copy = Conversation.objects.get(owner=teammate)
    done = submission.submit(user=teammate, data={"input": "And in Bergen?", "model": "sim-text",
                                                  "conversation": str(copy.pk), "client_request_id": "next-1"})
    request = done.request
    assert "previous_response_id" not in request.params and request.params.get("full_context") is True
    body = full_context_body(request, selectors.conversation_context(request=request))
    assert body["previous_response_id"] is None
    assert body["input"] == [
        {"role": "user", "content": "Tell me about rivers"},
        {"role": "assistant", "content": "Rivers **flow**."},
        {"role": "user", "content": "And in Oslo?"},
        {"role": "assistant", "content": "It rains in Oslo.\n\nTake a coat."},
        {"role": "user", "content": "And in Bergen?"},
    ]
    assert "resp_owner" not in str(body)


def test_a_link_to_one_turn_continues_that_turn(shared: dict[str, Any], owner: Any, teammate: Any) -> None:
    one = shares.share_create(conversation=shared["first"].conversation, user=owner, request=shared["second"])
    client_for(teammate).post(continue_url(one))
    copy = Conversation.objects.get(owner=teammate)
    assert list(copy.requests.values_list("input", flat=True)) == ["And in Oslo?"]


def test_not_signed_in_the_visitor_logs_in_first(shared: dict[str, Any], owner: Any, settings: Any) -> None:
    settings.RELAY_SHARE_ANONYMOUS = True
    public = shares.share_create(conversation=shared["first"].conversation, user=owner, anonymous=True)
    visitor = Client()
    page = visitor.get(reverse("responses_app:shared", args=[public.token])).content.decode()
    assert "Log in to continue this conversation" in page
    response = visitor.post(continue_url(public))
    assert response.status_code == 302
    shared_page = reverse("responses_app:shared", args=[public.token])
    assert response["Location"] == f"{reverse('login')}?next={shared_page}", "then back to the shared page"
    login = visitor.get(response["Location"]).content.decode()
    assert "Log in to continue this conversation as your own" in login
    assert ResponseRequest.objects.exclude(copy_of=None).count() == 0


def test_a_revoked_link_copies_nothing(shared: dict[str, Any], teammate: Any) -> None:
    shares.share_revoke(share=shared["share"])
    response = client_for(teammate).post(continue_url(shared["share"]))
    assert response.status_code == 404 and "This link was revoked or never existed" in response.content.decode()
    assert not Conversation.objects.filter(owner=teammate).exists()


def test_nothing_ended_yet_nothing_to_continue(owner: Any, teammate: Any) -> None:
    running = make_turn(owner, status="streaming")
    share = shares.share_create(conversation=running.conversation, user=owner)  # type: ignore[arg-type]
    response = client_for(teammate).post(continue_url(share))
    assert response.status_code == 409 and "There is nothing to continue yet" in response.content.decode()
    assert not Conversation.objects.filter(owner=teammate).exists()


def test_the_owner_is_offered_their_own_conversation(shared: dict[str, Any], owner: Any) -> None:
    page = client_for(owner).get(reverse("responses_app:shared", args=[shared["share"].token])).content.decode()
    assert "Open your conversation" in page and "Continue this conversation" not in page


def test_copies_are_not_counted_as_requests(shared: dict[str, Any], teammate: Any) -> None:
    period = analytics.DateRange.last_days(1)
    before = analytics.summary(period)["total"]
    client_for(teammate).post(continue_url(shared["share"]))
    assert ResponseRequest.objects.exclude(copy_of=None).count() == 2
    assert analytics.summary(period)["total"] == before
    assert get_user_model().objects.get(pk=teammate.pk).response_requests.filter(usage__isnull=False).count() == 0


def test_a_prompt_is_copied_as_the_text_its_person_wrote() -> None:
    sent = [{"role": "developer", "content": "Be brief"}, {"role": "user", "content": None},
            {"type": "function_call_output", "call_id": "c", "output": "42"},
            {"role": "user", "content": [{"type": "input_text", "text": "Look"}, {"type": "input_image"}]},
            {"type": "message", "role": "user", "content": "And this"}]
    assert shares.prompt_text(sent) == "Look\n\nAnd this"
    assert shares.prompt_text("Plain") == "Plain" and shares.prompt_text(None) == ""

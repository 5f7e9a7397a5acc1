"""Versions of a turn (branches): the tree, what Regenerate and Edit add, the branch every tab
shows, and the branch's history sent upstream: previous_response_id of its last completed answer,
or its turns as input when there is none (or the upstream forgot it). Personas: the owner, a
teammate, staff. No upstream here (starts are recorded): tests/relay/test_branch_upstream.py runs
the simulator."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.apps import apps
from django.test import Client
from django.urls import reverse

from responses_app import branches, selectors, services, submission
from responses_app.branches import Tree, Versions
from responses_app.models import Conversation, ResponseRequest
from responses_app.ops import analytics
from responses_app.relay.bodies import full_context_body
from responses_app.routing import websocket_urlpatterns
from tests.web.test_pages import client_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]


# --- the tree, without a database -----------------------------------------------------------------

def test_a_tree_gives_each_branch_and_each_turn_s_place_among_its_versions() -> None:
    t0 = datetime(2030, 1, 1)
    a, b, c, b2, d, a2 = (uuid.UUID(int=i) for i in range(1, 7))
    # a ─ b ─ c        b2 regenerated b; d follows b2; a2 is an edit of the first prompt
    #   └ b2 ─ d
    # a2
    tree = Tree([(d, b2, t0 + timedelta(4)), (a, None, t0), (b, a, t0 + timedelta(1)), (c, b, t0 + timedelta(2)),
                 (b2, a, t0 + timedelta(3)), (a2, None, t0 + timedelta(5))])
    assert tree.path(c) == [a, b, c] and tree.path(d) == [a, b2, d]
    assert tree.versions(b) == Versions(1, 2, None, b2) and tree.versions(b2) == Versions(2, 2, b, None)
    assert tree.versions(a2) == Versions(2, 2, a, None) and tree.versions(c) == Versions(1, 1, None, None)
    assert tree.newest_under(b) == c and tree.newest_under(a) == d, "the branch last added to"
    assert tree.leaf(None) == a2 and tree.leaf(c) == c and tree.leaf(uuid.UUID(int=99)) == a2
    orphan = Tree([(c, uuid.UUID(int=42), t0)])  # its parent deleted in the admin: a first turn
    assert orphan.path(c) == [c]


def test_a_branch_s_head_is_its_last_completed_answer_and_flagged_turns_are_not_turns() -> None:
    t0 = datetime(2030, 1, 1)
    a, b, c = (uuid.UUID(int=i) for i in range(1, 4))
    rows = [(a, None, t0), (b, a, t0 + timedelta(1)), (c, b, t0 + timedelta(2))]
    tree = Tree(rows, answers={a: "resp_a"}, unsent={c})
    assert branches.branch_head(turns=tree, parent_id=c) == branches.Head("resp_a", True, [a, b, c])
    assert branches.branch_head(turns=tree, parent_id=None) == branches.Head("", False, [])
    flagged_only = Tree(rows[:1], unsent={a})  # never sent: nothing to chain to, nothing to send again
    assert branches.branch_head(turns=flagged_only, parent_id=a) == branches.Head("", False, [a])


# --- helpers --------------------------------------------------------------------------------------------

def add(conversation: Conversation, owner: Any, prompt: str, *, parent: Any = "leaf", status: str = "completed",
        response_id: str | None = None) -> ResponseRequest:
    request, _ = services.request_create(owner=owner, input=prompt, model="sim-text",
                                         client_request_id=str(uuid.uuid4()), conversation=conversation,
                                         parent_id=parent)
    ResponseRequest.objects.filter(pk=request.pk).update(
        status=status, response_id=response_id if response_id is not None else f"resp_{prompt}",
        final_text=f"Answer to {prompt}")
    request.refresh_from_db()
    return request


def resend(client: Client, request: ResponseRequest, prompt: str | None = None) -> ResponseRequest:
    name = "chat-edit" if prompt is not None else "chat-regenerate"
    data = {"client_request_id": str(uuid.uuid4()), **({"prompt": prompt} if prompt is not None else {})}
    response = client.post(reverse(f"responses_app:{name}", args=[request.conversation_id, request.pk]), data,
                           HTTP_ACCEPT="application/json")
    assert response.status_code == 201, response.content
    return ResponseRequest.objects.get(pk=response.json()["id"])


def shown(client: Client, conversation_id: Any) -> list[str]:
    html = client.get(reverse("responses_app:chat", args=[conversation_id])).content.decode()
    return [m.split('"')[0] for m in html.split('<article class="turn" id="turn-')[1:]]


def three_turns(owner: Any) -> tuple[Conversation, ResponseRequest, ResponseRequest, ResponseRequest]:
    conversation = services.conversation_create(owner=owner)
    return conversation, add(conversation, owner, "A"), add(conversation, owner, "B"), add(conversation, owner, "C")


# --- Regenerate and Edit: versions, not duplicates ----------------------------------------------------

def test_regenerate_adds_a_version_of_the_turn_and_shows_its_branch(owner: Any) -> None:
    conversation, a, b, c = three_turns(owner)
    client = client_for(owner)
    b2 = resend(client, b)
    assert b2.parent_id == a.pk and b2.input == "B", "a sibling of the turn, not a turn at the end"
    assert b2.params["previous_response_id"] == "resp_A", "chained to the answer before the turn"
    assert shown(client, conversation.pk) == [str(a.pk), str(b2.pk)], "the later turns belong to the other version"
    html = client.get(reverse("responses_app:chat", args=[conversation.pk])).content.decode()
    assert 'data-version-count>2/2<' in html
    assert reverse("responses_app:chat-show", args=[conversation.pk, b.pk]) in html, "‹ goes to the first version"
    b3 = resend(client, b2, prompt="B, edited")
    assert b3.parent_id == a.pk and b3.input == "B, edited" and branches.versions_of(b3) == Versions(3, 3, b2.pk, None)
    assert ResponseRequest.objects.filter(conversation=conversation).count() == 5, "each version one logical request"


def test_switching_versions_shows_each_with_the_conversation_that_followed_it(owner: Any) -> None:
    conversation, a, b, c = three_turns(owner)
    client = client_for(owner)
    b2 = resend(client, b)
    show = reverse("responses_app:chat-show", args=[conversation.pk, b.pk])
    response = client.post(show, HTTP_ACCEPT="application/json")
    assert response.json() == {"ids": [str(a.pk), str(b.pk), str(c.pk)]}
    assert shown(client, conversation.pk) == [str(a.pk), str(b.pk), str(c.pk)]
    back = client.post(reverse("responses_app:chat-show", args=[conversation.pk, b2.pk]))  # no JavaScript
    assert back.status_code == 302 and back["Location"].endswith(f"#turn-{b2.pk}")
    assert shown(client, conversation.pk) == [str(a.pk), str(b2.pk)]
    # A link to a turn on the branch shown changes nothing (the branch below it stays as picked).
    client.get(reverse("responses_app:chat-show", args=[conversation.pk, a.pk]))
    assert shown(client, conversation.pk) == [str(a.pk), str(b2.pk)]
    other = services.conversation_create(owner=owner)
    assert client.post(reverse("responses_app:chat-show", args=[other.pk, b.pk])).status_code == 404


def test_only_the_owner_picks_the_version_shown(owner: Any, teammate: Any, staff: Any) -> None:
    conversation, a, b, c = three_turns(owner)
    b2 = resend(client_for(owner), b)
    show = reverse("responses_app:chat-show", args=[conversation.pk, b.pk])
    assert client_for(teammate).post(show).status_code == 404
    assert client_for(staff).post(show).status_code == 403
    assert client_for(staff).get(show).status_code == 302, "staff follow a link, and see the owner's choice"
    assert shown(client_for(staff), conversation.pk) == [str(a.pk), str(b2.pk)]
    staff_html = client_for(staff).get(reverse("responses_app:chat", args=[conversation.pk])).content.decode()
    assert "data-version-count>2/2<" in staff_html and "version-form" not in staff_html, "the count, no arrows"


# --- what is sent upstream: the branch's history -------------------------------------------------------

def test_a_new_turn_follows_the_branch_shown_and_chains_to_its_last_answer(owner: Any) -> None:
    conversation, a, b, c = three_turns(owner)
    client = client_for(owner)
    b2 = resend(client, b)
    ResponseRequest.objects.filter(pk=b2.pk).update(status="completed", response_id="resp_B2")
    body = {"input": "D", "model": "sim-text", "conversation": str(conversation.pk),
            "client_request_id": str(uuid.uuid4())}
    d = ResponseRequest.objects.get(pk=client.post(reverse("responses_app:api-requests"), json.dumps(body),
                                                   content_type="application/json").json()["id"])
    assert d.parent_id == b2.pk and d.params["previous_response_id"] == "resp_B2", "not C's answer"
    client.post(reverse("responses_app:chat-show", args=[conversation.pk, c.pk]))
    e = submission.submit(user=owner, data=dict(body, input="E", client_request_id=str(uuid.uuid4()))).request
    assert e.parent_id == c.pk and e.params["previous_response_id"] == "resp_C"


def test_an_unfinished_answer_is_passed_over_for_the_last_completed_one(owner: Any) -> None:
    conversation = services.conversation_create(owner=owner)
    a = add(conversation, owner, "A")
    add(conversation, owner, "B", status="incomplete")
    c = submission.submit(user=owner, data={"input": "C", "model": "sim-text", "conversation": str(conversation.pk),
                                            "client_request_id": str(uuid.uuid4())}).request
    assert c.params["previous_response_id"] == a.response_id and "full_context" not in c.params


def test_the_full_context_is_the_branch_s_turns_only(owner: Any) -> None:
    conversation, a, b, c = three_turns(owner)
    b2 = resend(client_for(owner), b, prompt="B2")
    ResponseRequest.objects.filter(pk=b2.pk).update(status="completed", response_id="resp_B2",
                                                    final_text="Answer to B2")
    d = add(conversation, owner, "D", status="pending")
    context = selectors.conversation_context(request=d)
    assert context == [{"role": "user", "content": "A"}, {"role": "assistant", "content": "Answer to A"},
                       {"role": "user", "content": "B2"}, {"role": "assistant", "content": "Answer to B2"}]
    sent = full_context_body(selectors.request_get(request_id=d.pk), context)
    assert sent["previous_response_id"] is None
    assert [item["content"] for item in sent["input"]] == ["A", "Answer to A", "B2", "Answer to B2", "D"]
    assert "B" not in [item["content"] for item in sent["input"]], "the other version is not this branch's"


def test_with_no_answer_on_the_branch_its_turns_are_sent_as_input(owner: Any) -> None:
    conversation = services.conversation_create(owner=owner)
    a = add(conversation, owner, "A", status="failed", response_id="")
    b = add(conversation, owner, "B")
    b2 = resend(client_for(owner), b)
    assert "previous_response_id" not in b2.params and b2.params["full_context"] is True
    assert selectors.conversation_context(request=b2) == [{"role": "user", "content": "A"},
                                                          {"role": "assistant", "content": "Answer to A"}]
    a2 = resend(client_for(owner), a, prompt="A again")
    assert a2.parent_id is None and "previous_response_id" not in a2.params and "full_context" not in a2.params
    assert selectors.conversation_context(request=a2) == [], "a new first prompt starts from nothing"


# --- every tab, analytics, older conversations ------------------------------------------------------------

async def _socket(user: Any, conversation_id: Any) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation_id}/")
    communicator.scope["user"] = user
    assert (await communicator.connect())[0]
    return communicator


@pytest.mark.django_db(transaction=True)
async def test_every_tab_hears_of_the_branch_shown(owner: Any) -> None:
    conversation, a, b, c = await sync_to_async(three_turns)(owner)
    client = Client()
    await sync_to_async(client.force_login)(owner)
    tab = await _socket(owner, conversation.pk)
    assert await tab.receive_json_from(timeout=5) == {"type": "turns", "ids": [str(a.pk), str(b.pk), str(c.pk)]}
    b2 = await sync_to_async(resend)(client, b)
    assert await tab.receive_json_from(timeout=5) == {"type": "branch", "ids": [str(a.pk), str(b2.pk)]}
    assert await tab.receive_json_from(timeout=5) == {"type": "turn", "request_id": str(b2.pk)}
    await sync_to_async(client.post)(reverse("responses_app:chat-show", args=[conversation.pk, b.pk]))
    assert await tab.receive_json_from(timeout=5) == {"type": "branch", "ids": [str(a.pk), str(b.pk), str(c.pk)]}
    await sync_to_async(client.post)(reverse("responses_app:chat-show", args=[conversation.pk, c.pk]))
    assert await tab.receive_nothing(timeout=0.3), "showing what is shown announces nothing"
    await tab.disconnect()
    later = await _socket(owner, conversation.pk)  # a tab that connects later gets the branch shown
    assert await later.receive_json_from(timeout=5) == {"type": "turns", "ids": [str(a.pk), str(b.pk), str(c.pk)]}
    await later.disconnect()


def test_analytics_counts_each_version_once(owner: Any) -> None:
    conversation, a, b, c = three_turns(owner)
    client = client_for(owner)
    b2 = resend(client, b)
    resend(client, b2, prompt="B3")
    client.post(reverse("responses_app:chat-show", args=[conversation.pk, b.pk]))
    client.post(reverse("responses_app:chat-show", args=[conversation.pk, b2.pk]))
    data = analytics.summary(analytics.DateRange.last_days(1))
    assert data["total"] == 5, "three turns and two versions, however often they were shown"


def test_existing_conversations_become_one_branch(owner: Any) -> None:
    from importlib import import_module

    migration = import_module("responses_app.migrations.0011_branches")
    conversation, a, b, c = three_turns(owner)
    lone = services.conversation_create(owner=owner)
    only = add(lone, owner, "Only")
    ResponseRequest.objects.update(parent=None)
    Conversation.objects.update(leaf=None)
    migration.chain_existing_turns(apps, None)
    parents = dict(ResponseRequest.objects.values_list("pk", "parent_id"))
    assert (parents[a.pk], parents[b.pk], parents[c.pk], parents[only.pk]) == (None, a.pk, b.pk, None)
    leaves = dict(Conversation.objects.values_list("pk", "leaf_id"))
    assert leaves[conversation.pk] == c.pk and leaves[lone.pk] == only.pk

"""Conversation actions (rename, delete, regenerate, edit and resend), the conversation socket
that announces turns to every tab, usage and cost per answer, and relative times; by persona:
owner, teammate, staff. No upstream: starting a runner is recorded, not run."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from responses_app import pricing, selectors, services
from responses_app.models import Conversation, ResponseRequest
from responses_app.routing import websocket_urlpatterns
from responses_app.templatetags.relay_tags import ago_text, group_blocks, usage_line
from tests.conftest import relay_check_errors
from tests.web.test_pages import client_for, make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]


def complete(request: ResponseRequest, response_id: str) -> None:
    ResponseRequest.objects.filter(pk=request.pk).update(status="completed", response_id=response_id)


def add_turn(conversation: Conversation, owner: Any, prompt: str, response_id: str) -> ResponseRequest:
    request, _ = services.request_create(owner=owner, input=prompt, model="sim-text",
                                         client_request_id=str(uuid.uuid4()), conversation=conversation,
                                         params={"metadata": {"sim.seed": "1"}, "background": False})
    complete(request, response_id)
    return request


# --- rename and delete ------------------------------------------------------------------------------

def test_the_owner_renames_and_nobody_else_can(owner: Any, teammate: Any, staff: Any) -> None:
    turn = make_turn(owner)
    url = reverse("responses_app:conversation-rename", args=[turn.conversation_id])
    assert client_for(teammate).post(url, {"title": "Mine now"}).status_code == 404
    assert client_for(staff).post(url, {"title": "Staff edit"}).status_code == 403  # staff read, never write
    assert client_for(owner).post(url, {"title": "   "}).status_code == 400
    response = client_for(owner).post(url, {"title": "  Rivers \n and  lakes "})
    assert response.status_code == 302
    assert Conversation.objects.get(pk=turn.conversation_id).title == "Rivers and lakes"


def test_a_deleted_conversation_is_gone_for_its_owner_and_kept_for_the_admin(owner: Any) -> None:
    turn = make_turn(owner)
    owner_client = client_for(owner)
    delete = reverse("responses_app:conversation-delete", args=[turn.conversation_id])
    assert owner_client.post(delete).status_code == 302
    assert owner_client.get(reverse("responses_app:chat", args=[turn.conversation_id])).status_code == 404
    assert str(turn.conversation_id) not in owner_client.get(reverse("responses_app:conversations")).content.decode()
    regenerate = reverse("responses_app:chat-regenerate", args=[turn.conversation_id, turn.pk])
    assert owner_client.post(regenerate).status_code == 404
    assert ResponseRequest.objects.filter(pk=turn.pk).exists(), "the audit row stays"
    superuser = get_user_model().objects.create_superuser("root", password="pw")
    admin = client_for(superuser).get(reverse("admin:responses_app_conversation_changelist") + "?deleted_at__isempty=0")
    assert str(turn.conversation) in admin.content.decode(), "the admin lists deleted conversations"


# --- regenerate and edit ----------------------------------------------------------------------------

def test_regenerate_is_a_new_request_chained_to_the_answer_before(owner: Any, no_upstream: list[str]) -> None:
    first = make_turn(owner, prompt="One")
    complete(first, "resp_one")
    second = add_turn(first.conversation, owner, "Two", "resp_two")  # type: ignore[arg-type]
    key = str(uuid.uuid4())
    url = reverse("responses_app:chat-regenerate", args=[first.conversation_id, second.pk])
    response = client_for(owner).post(url, {"client_request_id": key}, HTTP_ACCEPT="application/json")
    assert response.status_code == 201
    new = ResponseRequest.objects.get(pk=response.json()["id"])
    assert new.input == "Two" and new.model == second.model and new.conversation_id == first.conversation_id
    assert new.params["previous_response_id"] == "resp_one", "as if the regenerated answer had not been"
    assert new.params["metadata"] == {"sim.seed": "1"}
    assert no_upstream == [str(new.pk)]
    again = client_for(owner).post(url, {"client_request_id": key}, HTTP_ACCEPT="application/json")
    assert again.status_code == 200 and again.json()["id"] == str(new.pk), "a resubmit is the same request"
    assert ResponseRequest.objects.filter(conversation=first.conversation).count() == 3


def test_edit_and_resend_sends_the_edited_prompt(owner: Any, teammate: Any) -> None:
    first = make_turn(owner, prompt="Original")
    url = reverse("responses_app:chat-edit", args=[first.conversation_id, first.pk])
    assert client_for(teammate).post(url, {"prompt": "x"}).status_code == 404
    assert client_for(owner).post(url, {"prompt": "  "}).status_code == 400
    response = client_for(owner).post(url, {"prompt": "Edited", "client_request_id": str(uuid.uuid4())})
    assert response.status_code == 302
    new = ResponseRequest.objects.filter(conversation=first.conversation).order_by("-created").first()
    assert new is not None and new.input == "Edited" and "previous_response_id" not in new.params
    assert response["Location"].endswith(f"#turn-{new.pk}")


def test_turn_actions_show_only_to_the_owner_of_a_finished_turn(owner: Any, staff: Any) -> None:
    done = make_turn(owner)
    html = client_for(owner).get(reverse("responses_app:chat", args=[done.conversation_id])).content.decode()
    assert ">Regenerate</button>" in html and ">Edit</button>" in html and ">Rename</button>" in html
    staff_html = client_for(staff).get(reverse("responses_app:chat", args=[done.conversation_id])).content.decode()
    assert "Regenerate" not in staff_html and ">Delete</button>" not in staff_html
    live = make_turn(owner, status="streaming")
    live_html = client_for(owner).get(reverse("responses_app:chat", args=[live.conversation_id])).content.decode()
    assert "Regenerate" not in live_html and 'class="stop-form' in live_html


def test_no_stop_beside_a_known_outcome(owner: Any) -> None:
    turn = make_turn(owner, status="streaming")
    view = selectors.view_latest(request=turn)
    view["meta"]["status"] = "completed"
    turn.checkpoints.update(view=view)
    html = client_for(owner).get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    assert 'data-badge="completed"' in html and 'class="stop-form' not in html


# --- the conversation socket ------------------------------------------------------------------------

async def _connect(user: Any, conversation_id: Any) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation_id}/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@pytest.mark.django_db(transaction=True)
async def test_every_tab_hears_of_a_new_turn_and_outsiders_are_refused(owner: Any, teammate: Any) -> None:
    from asgiref.sync import sync_to_async

    turn = await sync_to_async(make_turn)(owner)
    tab_a = await _connect(owner, turn.conversation_id)
    tab_b = await _connect(owner, turn.conversation_id)
    for tab in (tab_a, tab_b):
        assert await tab.receive_json_from(timeout=5) == {"type": "turns", "ids": [str(turn.pk)]}
    client = Client()
    await sync_to_async(client.force_login)(owner)
    body = {"input": "From the API", "model": "sim-text", "conversation": str(turn.conversation_id),
            "client_request_id": str(uuid.uuid4())}
    response = await sync_to_async(client.post)(reverse("responses_app:api-requests"), json.dumps(body),
                                                content_type="application/json")
    assert response.status_code == 201
    new = response.json()["id"]
    for tab in (tab_a, tab_b):  # the branch shown first (the new turn after the one before), then the turn
        assert await tab.receive_json_from(timeout=5) == {"type": "branch", "ids": [str(turn.pk), new]}
        assert await tab.receive_json_from(timeout=5) == {"type": "turn", "request_id": new}
    await sync_to_async(client.post)(reverse("responses_app:api-requests"), json.dumps(body),
                                     content_type="application/json")
    assert await tab_a.receive_nothing(timeout=0.3), "a resubmit is not a new turn"
    await sync_to_async(client.post)(reverse("responses_app:conversation-rename", args=[turn.conversation_id]),
                                     {"title": "New"})
    await sync_to_async(client.post)(reverse("responses_app:conversation-delete", args=[turn.conversation_id]))
    for tab in (tab_a, tab_b):
        assert await tab.receive_json_from(timeout=5) == {"type": "renamed", "title": "New"}
        assert await tab.receive_json_from(timeout=5) == {"type": "deleted"}
    for tab in (tab_a, tab_b):
        await tab.disconnect()

    outsider = await _connect(teammate, turn.conversation_id)
    assert (await outsider.receive_output(timeout=5))["code"] == 4403
    gone = await _connect(owner, turn.conversation_id)
    assert (await gone.receive_output(timeout=5))["code"] == 4404


# --- usage, cost, times, reasoning groups -------------------------------------------------------------

USAGE = {"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 200}, "output_tokens": 300,
         "output_tokens_details": {"reasoning_tokens": 120}, "total_tokens": 1500}


def test_usage_per_answer_with_a_cost_when_priced(owner: Any, settings: Any) -> None:
    settings.RELAY_PRICES = {"sim-text": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}
    turn = make_turn(owner)
    ResponseRequest.objects.filter(pk=turn.pk).update(usage=USAGE)
    cost = pricing.cost_of(USAGE, "sim-text")
    assert cost == pricing.Cost(Decimal(1000 * 2 + 200 * 0.5 + 300 * 8) / 1_000_000)
    assert pricing.cost_of(USAGE, "unpriced") is None
    html = client_for(owner).get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    for part in ("1200 in", "200 cached", "300 out", "120 reasoning", "$0.0045"):
        assert part in html
    listing = client_for(owner).get(reverse("responses_app:conversations")).content.decode()
    assert '1500 tokens used (1200 in · 300 out) · <span data-usage="cost">$0.0045</span>' in listing
    assert str(usage_line(None)) == ""
    stopped = str(usage_line({"output_tokens": 7, "total_tokens": 7, "estimated": True}))
    assert "≈ 7 out" in stopped and " in<" not in stopped and "estimated" in stopped


@pytest.mark.parametrize(("value", "message"), [
    ("[1]", "JSON object of models"), ("{", "must be a JSON object"),
    ('{"m": {"input": -1, "output": 1}}', "non-negative"),
    ('{"m": {"inptu": 1, "output": 1}}', "input and output"), ('{"m": {"input": true, "output": 1}}', "non-negative"),
    ('{"m": {"input": 1}}', "input and output"), ('{"m": {"input": "NaN", "output": 1}}', "non-negative"),
    ('{"m": {"input": "two", "output": 1}}', "non-negative"),
])
def test_bad_prices_are_reported_by_manage_py_check(value: str, message: str, settings: Any) -> None:
    settings.RELAY_PRICES = value
    assert [(e.id, message in e.msg) for e in relay_check_errors()] == [("responses_app.E002", True)]


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "just now"), (44, "just now"), (80, "a minute ago"), (5 * 60, "5 minutes ago"), (50 * 60, "an hour ago"),
    (5 * 3600, "5 hours ago"), (26 * 3600, "yesterday"), (3 * 86400, "3 days ago"),
])
def test_relative_times_read_naturally(seconds: int, text: str) -> None:
    now = timezone.now()
    assert ago_text(now - timedelta(seconds=seconds), now) == text


def test_each_reasoning_item_is_one_group_with_its_parts() -> None:
    blocks = [
        {"id": "r0", "kind": "reasoning", "tool": "reasoning", "item_id": "r0", "state": "completed"},
        {"id": "r0-s0", "kind": "reasoning", "item_id": "r0", "text": "a"},
        {"id": "t", "kind": "text", "text": "answer"},
        {"id": "r0-s1", "kind": "reasoning", "item_id": "r0", "text": "b"},
        {"id": "r1", "kind": "reasoning", "tool": "reasoning", "item_id": "r1", "state": "in_progress"},
    ]
    groups = group_blocks(blocks, 3)
    assert [g["id"] for g in groups] == ["r0", "t", "r1"]
    assert [p["id"] for p in groups[0]["parts"]] == ["r0-s0", "r0-s1"]
    assert groups[0]["title"] == "Thought for 3 s" and groups[2]["title"] == "Thinking…"

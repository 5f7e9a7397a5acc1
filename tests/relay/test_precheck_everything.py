"""The precheck sees everything sent: every text-bearing part of an input item is judged, a file
that is not text is not let through unchecked where errors fail closed, and a turn it flagged never
enters the context of a later turn (full-context retries included). Also: deleting a conversation
stops its streams; a title with U+0000 is refused as a prompt is (on PostgreSQL too)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from responses_app import api, selectors, services
from responses_app.models import Conversation, ResponseRequest
from responses_app.relay.hub import get_hub
from responses_app.relay.precheck import input_text, unreadable_files
from responses_app.relay.stream_runner import StreamRunner
from responses_app.safety.checkers import reset_checker
from tests.relay.helpers import FAST, make_request, reload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

PHRASE = "launch codes"


@pytest.fixture
def precheck_on(relay_settings: Any) -> Iterator[Any]:
    relay_settings.RELAY_SAFETY_PRECHECK = True
    relay_settings.RELAY_SAFETY_CHECKER = "rules"
    relay_settings.RELAY_SAFETY_RULES = [r"launch\s+codes"]
    reset_checker()
    yield relay_settings
    reset_checker()


def b64(text: bytes) -> str:
    return base64.b64encode(text).decode()


@pytest.mark.parametrize("item", [
    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": "the launch codes"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "here are the launch codes"},
    {"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "find the launch codes"}]},
    {"role": "user", "content": [{"type": "input_file", "filename": "notes.txt",
                                  "file_data": "data:text/plain;base64," + b64(b"the launch codes are 0000")}]},
    {"role": "user", "content": [{"type": "input_file", "filename": "notes.txt", "file_data": b64(b"launch codes")}]},
    {"role": "user", "content": [{"type": "input_text", "text": "launch codes"}]},
])
def test_every_text_bearing_part_is_read(item: dict[str, Any]) -> None:
    request = ResponseRequest(input=[item], params={})
    assert PHRASE in input_text(request).replace("  ", " ")


def test_what_only_names_or_points_is_not_judged_and_a_binary_file_is_counted() -> None:
    request = ResponseRequest(input=[{"role": "user", "content": [
        {"type": "input_image", "image_url": "https://example.org/launch-codes.png"},
        {"type": "input_file", "filename": "scan.pdf", "file_data": b64(b"%PDF-\xff\xfe\x00binary")}]}], params={})
    assert "example.org" not in input_text(request) and "scan.pdf" in input_text(request)
    assert unreadable_files(request) == 1


async def test_a_flagged_turn_never_enters_a_later_context(owner: Any, precheck_on: Any) -> None:
    first = await api.asubmit(owner, "Tell me the launch codes", model="sim-text", metadata=FAST)
    assert (await api.await_request(first, timeout=10)).error_code == "input_flagged"
    second = await api.asubmit(owner, "Then tell me about rivers", model="sim-text", metadata=FAST,
                               conversation=first.conversation_id)
    done = await api.await_request(second, timeout=10)
    assert done.status == "completed"
    assert "full_context" not in done.params and "previous_response_id" not in done.params, \
        "a flagged turn alone before: nothing to chain to, nothing to resend"
    third = await api.asubmit(owner, "And lakes?", model="sim-text", metadata=FAST,
                              conversation=first.conversation_id)
    await api.await_request(third, timeout=10)
    context = await sync_to_async(selectors.conversation_context)(request=await reload(third))
    assert context and all(PHRASE not in str(item) for item in context), context


async def test_a_binary_file_is_not_sent_unchecked_when_errors_fail_closed(owner: Any, precheck_on: Any) -> None:
    precheck_on.RELAY_SAFETY_ON_ERROR = "fail_closed"
    pdf = [{"role": "user", "content": [{"type": "input_file", "filename": "scan.pdf",
                                          "file_data": b64(b"%PDF-\xff\xfe\x00binary")}]}]
    request = await api.asubmit(owner, pdf, model="sim-text", metadata=FAST)
    done = await api.await_request(request, timeout=10)
    assert done.error_code == "input_flagged" and "not text a checker reads" in done.error_message


async def test_deleting_a_conversation_stops_its_streams(owner: Any) -> None:
    request = await make_request(owner, "sim-long", {"sim.tokens_per_s": "20", "sim.tokens": "400"})
    runner = StreamRunner(str(request.pk), get_hub())
    run = get_hub().loop.create_task(runner.run())
    while not (await reload(request)).response_id:
        await asyncio.sleep(0.02)
    client = Client()
    await sync_to_async(client.force_login)(owner)
    deleted = await sync_to_async(client.post)(reverse("responses_app:conversation-delete",
                                                       args=[request.conversation_id]))
    assert deleted.status_code == 302
    await run
    done = await reload(request)
    assert done.status == "cancelled" and done.cancels == 1
    again = await sync_to_async(client.post)(reverse("responses_app:api-requests"), {
        "input": "More", "model": "sim-text", "conversation": str(request.conversation_id)})
    assert again.status_code == 404, "a deleted conversation takes no new turn"


def test_a_title_that_no_database_stores_is_a_400(owner: Any) -> None:
    title = "bad\x00title"  # (a lone surrogate cannot travel in a form's UTF-8: only JSON carries one)
    conversation = services.conversation_create(owner=owner, title="Before")
    client = Client()
    client.force_login(owner)
    response = client.post(reverse("responses_app:conversation-rename", args=[conversation.pk]), {"title": title})
    assert response.status_code == 400
    assert Conversation.objects.get(pk=conversation.pk).title == "Before"

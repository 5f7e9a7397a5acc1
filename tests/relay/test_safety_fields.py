"""Buffered safety holds on every field a viewer can see, through the real relay: a provider that
puts the flagged phrase into a tool's name and server label, a citation's title and URL and a
failed response's error message shows it in no socket frame, checkpoint, API answer, page or
stored field of the request."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from responses_app.models import Checkpoint, EventRecord, ResponseRequest
from responses_app.safety.checkers import reset_checker
from tests.relay.helpers import Watcher, connect, make_request, reload
from tests.upstreams import Reply, scripted_upstream

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

PHRASE = "launch codes"
RULE = r"launch(\s|%20)codes"


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps({**event, "sequence_number": n}) + b"\n\n"
                    for n, event in enumerate(events))


CITATION = {"type": "url_citation", "title": "the launch codes are 0000",
            "url": "https://example.com/launch%20codes", "start_index": 0, "end_index": 5}
MCP = {"id": "mcp_1", "type": "mcp_call", "name": "read_launch codes", "server_label": "launch codes server",
       "arguments": "{}", "status": "in_progress"}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
PART = {"type": "output_text", "text": "", "annotations": []}
WHERE = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
HOSTILE = sse(
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
    {"type": "response.output_item.added", "output_index": 0, "item": MCP},
    {"type": "response.output_item.done", "output_index": 0, "item": {**MCP, "status": "completed", "output": "ok"}},
    {"type": "response.output_item.added", "output_index": 1, "item": MESSAGE},
    {"type": "response.content_part.added", **WHERE, "part": PART},
    {"type": "response.output_text.delta", **WHERE, "delta": "Here are the sources. "},
    {"type": "response.output_text.annotation.added", **WHERE, "annotation_index": 0, "annotation": CITATION},
    {"type": "response.content_part.done", **WHERE, "part": {**PART, "text": "Here are the sources. ",
                                                             "annotations": [CITATION]}},
    {"type": "response.failed", "response": {"id": "resp_1", "status": "failed", "output": [], "error": {
        "code": "server_error", "message": "the launch codes are 0000"}}},
)


@pytest.fixture
def buffered(relay_settings: Any) -> Any:
    relay_settings.RELAY_SAFETY_MODE = "buffered"
    relay_settings.RELAY_SAFETY_RULES = [RULE]
    reset_checker()
    yield relay_settings
    reset_checker()


@sync_to_async
def everything_seen(user: Any, request: ResponseRequest) -> str:
    row = ResponseRequest.objects.get(pk=request.pk)
    client = Client()
    client.force_login(user)
    chat = f"/c/{request.conversation_id}/"
    pages = [client.get(url).content.decode() for url in (f"/api/requests/{request.pk}", chat,
                                                          f"{chat}turns/{request.pk}/")]
    checkpoints = [orjson.dumps([c.view, c.ops, c.snapshot]).decode()
                   for c in Checkpoint.objects.filter(request=request)]
    return "\n".join([row.error_code, row.error_message, row.final_text, row.incomplete_reason, *pages, *checkpoints])


def leaks(text: str) -> bool:
    return PHRASE in text.lower() or "launch%20codes" in text.lower()


async def test_no_field_shows_the_phrase_in_buffered_mode(owner: Any, buffered: Any) -> None:
    async with scripted_upstream({"POST /v1/responses": Reply(body=HOSTILE)}) as upstream:
        buffered.RELAY_UPSTREAM_BASE_URL = upstream.base
        request = await make_request(owner, "gpt-test", background=False)
        communicator = await connect(owner, request.pk)
        assert (await communicator.connect())[0]
        watcher = Watcher(communicator)
        await watcher.until_terminal()
        await communicator.disconnect()
    saved = await reload(request)
    assert saved.status == "incomplete" and saved.incomplete_reason == "content_filter"
    frames = json.dumps(watcher.messages, ensure_ascii=False)
    assert not leaks(frames), "no socket frame"
    assert not leaks(await everything_seen(owner, saved)), "no page, API answer, checkpoint or stored field"
    log = await sync_to_async(lambda: "".join(b.text for b in EventRecord.objects.filter(request=saved)))()
    assert "launch codes server" in log, "the raw event log (staff only) keeps what the upstream said"

"""A request handed over after its tool ran: the runner that takes it over rebuilds the view from
the raw event log, where tool payloads are redacted and tool outputs are not at all. The view it
goes on from must be the one its viewers hold (the committed one), not the redacted rebuild."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from responses_app import selectors
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.streaming.redact import REDACTED
from tests.relay.helpers import Watcher, connect, reload
from tests.relay.test_handoff import spawn
from tests.relay.test_takeover import wait_for_status
from tests.relay.test_tools import tool_request

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


def tool_blocks(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in view["blocks"] if b.get("tool") == "function_call"]


async def test_a_tool_block_taken_over_keeps_its_arguments_and_output(owner: Any) -> None:
    request = await tool_request(owner, "sim-function", {"sim.tokens_per_s": "40", "sim.tokens": "120"})
    hub = get_hub()
    first = StreamRunner(str(request.pk), hub)
    task = spawn(hub, first)
    communicator = await connect(owner, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    async with asyncio.timeout(30):  # the tool ran and the continuation streams
        while watcher.view is None or not (
                (blocks := tool_blocks(watcher.view)) and blocks[0].get("state") == "done"
                and any(b.get("kind") == "text" and b.get("text") for b in watcher.view["blocks"][1:])):
            await watcher.receive()
    assert first.hand_off()
    await asyncio.wait_for(task, 10)
    live = tool_blocks(watcher.view)[0]
    assert live["arguments"] != REDACTED and live.get("output")

    second = StreamRunner(str(request.pk), hub)
    runner = spawn(hub, second)
    terminal = await watcher.until_terminal(60)
    await runner
    saved = await wait_for_status(request, {"completed", "failed", "unknown", "error", "incomplete"}, timeout=10)
    await communicator.disconnect()
    assert saved.status == terminal["status"] == "completed"
    committed = await sync_to_async(selectors.view_latest)(request=await reload(request))
    assert committed["revision"] == watcher.view["revision"]
    assert tool_blocks(committed) == tool_blocks(watcher.view) == [tool_blocks(watcher.view)[0]]
    assert tool_blocks(committed)[0]["arguments"] == live["arguments"]
    assert tool_blocks(committed)[0].get("output") == live["output"]
    assert committed["blocks"] == watcher.view["blocks"], "the resumed view is the live one"

"""Replay is the live pipeline: every real capture, relayed by a real runner over loopback HTTP,
shows the view `replay_bytes` makes of the same bytes (one end-of-stream rule for both)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.streaming.replay import replay_bytes
from responses_app.upstream.http import Upstream
from tests.conftest import REAL_STREAMS, real_stream_files, require_real_streams
from tests.relay.helpers import make_request
from tests.upstreams import Reply, json_error, scripted_upstream

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

FILES = real_stream_files() or [REAL_STREAMS / "absent.sse"]
_LATER_ROUND = re.compile(r"^r\d+-")
# What the relay itself adds once the stream closed: its tool step (a function call's block
# goes running, then done with its output; an approval request's waits for a person), and how
# the request ended when no event said so.
_STEPPED = ("function_call", "mcp_approval_request")
_TOOL_STEP = ("state", "output")
_RELAY_META = ("status", "error", "incomplete_reason", "activity")


def first_response(view: dict[str, Any], *, tool_step: bool) -> dict[str, Any]:
    blocks = []
    for block in view["blocks"]:
        if _LATER_ROUND.match(block["id"]):
            continue
        if tool_step and block.get("tool") in _STEPPED:
            block = {k: v for k, v in block.items() if k not in _TOOL_STEP}
        blocks.append(block)
    return {"blocks": blocks, "meta": {k: v for k, v in view["meta"].items() if k not in _RELAY_META}}


@pytest.mark.parametrize("capture", FILES, ids=[p.name for p in FILES])
async def test_a_relayed_capture_shows_what_its_replay_shows(owner: Any, capture: Path) -> None:
    require_real_streams()
    body = capture.read_bytes()
    replayed = replay_bytes(body)
    # A continuation (after a function call) is refused: only the capture's own response is compared.
    reply = Reply(body=body, chunk_size=997, then=json_error(400, "no_more", "one response only"))
    async with scripted_upstream({"POST /v1/responses": reply}) as upstream:
        request = await make_request(owner, "gpt-test", background=False)
        runner = StreamRunner(str(request.pk), get_hub(), upstream_factory=lambda: Upstream(base=upstream.base,
                                                                                            api_key=""))
        task = asyncio.create_task(runner.run())
        while not task.done():  # an MCP approval request waits for a person: stop it there
            if runner.view.meta.get("status") == "waiting_for_approval":
                runner.cancel()
            await asyncio.wait([task], timeout=0.05)
        await task
    live = runner.view.to_dict()
    tool_step = any(block.get("tool") in _STEPPED for block in replayed.view["blocks"])
    assert first_response(live, tool_step=tool_step) == first_response(replayed.view, tool_step=tool_step)
    if replayed.status in ("completed", "failed", "incomplete") and not tool_step:
        assert live["meta"]["status"] == replayed.status, "a settled response keeps its own status"

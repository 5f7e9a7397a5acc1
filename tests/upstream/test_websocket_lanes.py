"""Isolated lanes over one shared upstream WebSocket (RELAY_UPSTREAM_TRANSPORT=websocket), against
the standalone simulator over real loopback sockets: a hostile response (a 20 MB frame, a broken
frame, an error event) ends only itself while another user's answer on the same connection
completes with its full text; when the shared connection itself drops, a background answer
completes over HTTP and a foreground one ends naming the lost connection; a lane its runner does
not read is bounded and ended alone, without stalling the others for longer than LANE_WAIT_S."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.upstream import lane, websocket
from responses_app.upstream.websocket import WebSocketUpstream
from tests.relay.helpers import make_request, reload
from tests.upstream.test_websocket import hub_over_websocket, hub_upstream  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

INNOCENT = {"sim.tokens_per_s": "40", "sim.seed": "11"}  # about 40 deltas over a second
HOSTILE = {
    "a 20 MB frame": ("sim-text", {"sim.delta_chars": "20000000", "sim.tokens": "1", "sim.first_byte_delay_ms": "300"}),
    "a broken frame": ("sim-text", {"sim.malformed_at": "4", "sim.tokens_per_s": "200"}),
    "an error event": ("sim-error", {"sim.tokens_per_s": "200"}),
}


async def run(owner: Any, model: str, metadata: dict[str, str], *, background: bool = False) -> Any:
    request = await make_request(owner, model, metadata, background=background, text="Tell me a story")
    await asyncio.wait_for(StreamRunner(str(request.pk), get_hub()).run(), 60)
    return await reload(request)


@pytest.mark.parametrize("fault", list(HOSTILE))
async def test_a_hostile_response_ends_only_itself(owner: Any, teammate: Any, hub_over_websocket: Any,  # noqa: F811
                                                   fault: str) -> None:
    alone = await run(owner, "sim-text", INNOCENT)
    assert alone.status == "completed"
    model, metadata = HOSTILE[fault]
    innocent, hostile = await asyncio.gather(run(owner, "sim-text", INNOCENT), run(teammate, model, metadata))
    assert innocent.status == "completed", f"{fault} ended another user's answer: {innocent.error_code}"
    assert innocent.final_text == alone.final_text
    if fault == "a 20 MB frame":  # skipped as oversized; the reconcile's Response is bounded too
        assert (hostile.status, hostile.incomplete_reason) == ("incomplete", "max_answer_chars")
        assert len(hostile.final_text) <= 2_000_000
    assert hub_upstream().connections == 1, "the shared connection stayed open"


async def test_a_dropped_connection_ends_each_lane_honestly(owner: Any, teammate: Any, outsider: Any,
                                                            hub_over_websocket: Any) -> None:  # noqa: F811
    alone = await run(owner, "sim-text", INNOCENT, background=True)
    paced = {"sim.tokens_per_s": "100", "sim.seed": "11"}
    dropper = {"sim.drop_after": "5", "sim.tokens_per_s": "100"}
    background, foreground, _ = await asyncio.gather(
        run(owner, "sim-text", INNOCENT, background=True),  # over HTTP: WebSocket mode has no background
        run(teammate, "sim-text", paced),  # on the connection that drops
        run(outsider, "sim-text", dropper))
    assert background.status == "completed" and background.final_text == alone.final_text
    assert (foreground.status, foreground.error_code) == ("failed", "upstream_connection_lost")


async def test_a_lane_nobody_reads_is_bounded_and_ended_alone(simulator_url: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(websocket, "LANE_WAIT_S", 0.3)
    monkeypatch.setattr(lane, "lane_max_chars", lambda: 4000)
    upstream = WebSocketUpstream(base=simulator_url)
    body = {"model": "sim-long", "input": "Tell me a story", "store": True,
            "metadata": {"sim.tokens_per_s": "0", "sim.tokens": "3000", "sim.seed": "3"}}
    try:
        async with upstream.create_stream(body) as stuck:
            assert isinstance(stuck, lane.Lane)
            async with upstream.create_stream(dict(body, metadata={"sim.seed": "4"})) as flowing:
                types = [orjson.loads(frame)["type"] async for frame in flowing]
            assert types[-1] == "response.completed", "the other lane went on"
            async with asyncio.timeout(5):
                while not stuck.overflowed:
                    await asyncio.sleep(0.01)
            held = stuck._pending
            assert held < 4000 + 4000, f"{held} characters held for a lane nobody reads"
            read = [orjson.loads(frame)["type"] async for frame in stuck]
            assert "response.completed" not in read, "ended without its terminal event: a drop"
            connection = upstream.connection
            assert connection is not None and connection.overflows == 1 and connection.closed is None
    finally:
        await upstream.aclose()


async def test_frames_nobody_reads_are_bounded_by_closing_the_connection(simulator_url: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # WebSocket mode cannot cancel a response: once its reader stopped (a Stop, the answer's
    # bound), the rest crosses the socket unread. Past a bound the connection is closed.
    monkeypatch.setattr(websocket, "orphan_max_chars", lambda: 3_000_000)
    upstream = WebSocketUpstream(base=simulator_url)
    body = {"model": "sim-text", "input": "Tell me a story", "store": True,
            "metadata": {"sim.delta_chars": "1000000", "sim.tokens": "20", "sim.tokens_per_s": "20"}}
    try:
        async with upstream.create_stream(body) as lane:
            async for frame in lane:
                if '"response.output_text.delta"' in frame[:200]:
                    break  # the reader stops here, as the runner does at a bound
        connection = upstream.connection
        assert connection is not None
        async with asyncio.timeout(10):
            while connection.closed is None:
                await asyncio.sleep(0.02)
        assert connection.closed == (1000, "orphan frames") and connection.orphan_chars <= 5_000_000
        assert connection.orphans < 10, "closed long before the rest of the answer was sent"
    finally:
        await upstream.aclose()

"""The relay over the Responses API's WebSocket mode (RELAY_UPSTREAM_TRANSPORT=websocket) against
the standalone simulator over real loopback sockets: the fault matrix ends each request as over
SSE (the same outcome, view and counts), tool rounds stay on one connection, the connection rotates
at its time limit without losing a turn, and padding is neither asked for nor stored."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from responses_app import selectors
from responses_app.models import ResponseRequest
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.streaming.transcript import Transcript
from responses_app.upstream.http import Upstream
from responses_app.upstream.websocket import WebSocketUpstream
from tests.relay.helpers import make_request, reload
from tests.relay.test_endings import second_turn_after_a_forgotten_chain, segments_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

PACED = {"sim.tokens_per_s": "150"}


@pytest.fixture
async def hub_over_websocket(settings: Any) -> Any:
    """The hub's own upstream client in WebSocket mode, as a process has it; closed after the test."""
    settings.RELAY_UPSTREAM_TRANSPORT = "websocket"
    yield settings
    hub = get_hub()
    if hub._upstream is not None:
        await hub._upstream.aclose()
        hub._upstream = None


def hub_upstream() -> WebSocketUpstream:
    upstream = get_hub().upstream()
    assert isinstance(upstream, WebSocketUpstream)
    return upstream


def client_for(transport: str, base: str) -> Upstream:
    return WebSocketUpstream(base=base) if transport == "websocket" else Upstream(base=base)


async def relay(owner: Any, transport: str, base: str, model: str = "sim-text",
                metadata: dict[str, str] | None = None, *, upstream: Upstream | None = None,
                background: bool = False, text: str = "Hello there") -> tuple[ResponseRequest, StreamRunner]:
    """`transport` "hub": the hub's client, shared by every runner, as in a process."""
    request = await make_request(owner, model, metadata, background=background, text=text)
    client = upstream or client_for(transport, base)
    runner = StreamRunner(str(request.pk), get_hub(),
                          upstream_factory=None if transport == "hub" else lambda: client)
    await asyncio.wait_for(runner.run(), 40)
    return await reload(request), runner


def outcome(saved: ResponseRequest, runner: StreamRunner, segments: list[Any]) -> dict[str, Any]:
    """What must be the same whatever the transport."""
    view = runner.view.to_dict()
    view.pop("revision")
    return {"status": saved.status, "final_text": saved.final_text, "error_code": saved.error_code,
            "view": view, "events": saved.events, "duplicates": saved.duplicates, "gaps": saved.gaps,
            "malformed": saved.malformed_events, "unknown": saved.unknown_events, "retries": saved.retries,
            "disconnects": saved.disconnects, "usage": saved.usage,
            "segments": [(s.kind, s.outcome, s.events) for s in segments]}


def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    sleep = asyncio.sleep

    async def quick(delay: float, *args: Any) -> Any:
        return await sleep(0, *args)

    monkeypatch.setattr(asyncio, "sleep", quick)


FAULTS = {
    "completes": ("sim-text", {}),
    # flat out, the response is complete upstream before the socket drops: the reconcile finds it
    "drop mid-answer": ("sim-text", {"sim.drop_after": "12"}),
    "429 before the stream": ("sim-text", {"sim.http_error": "429"}),
    "failed after text": ("sim-text", {"sim.fail_at": "15"}),
    "error event": ("sim-error", {}),
    "malformed and unknown": ("sim-text", {"sim.malformed_at": "6", "sim.unknown_at": "8"}),
    "duplicates": ("sim-text", {"sim.duplicate": "true"}),
    "tool round": ("sim-function", {}),
    "stall": ("sim-text", {"sim.stall_at": "10", "sim.stall_ms": "300"}),
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_each_fault_ends_as_over_sse(owner: Any, simulator_url: str, fault: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    no_wait(monkeypatch)  # retries of the 429 without waiting
    model, metadata = FAULTS[fault]
    ends = {}
    for transport in ("sse", "websocket"):
        saved, runner = await relay(owner, transport, simulator_url, model, metadata)
        ends[transport] = outcome(saved, runner, await segments_of(saved))
    if fault == "duplicates":
        # The terminal event's copy is read over SSE when the same chunk carries it; over WebSocket
        # mode it is a frame of its own, after the stream ended: one duplicate fewer, nothing else.
        sse, ws = ends["sse"], ends["websocket"]
        assert ws["duplicates"] in (sse["duplicates"], sse["duplicates"] - 1)
        assert ws["events"] == sse["events"]
        for end in ends.values():
            end.pop("duplicates")
            end["segments"] = [(kind, result) for kind, result, _ in end["segments"]]
    assert ends["websocket"] == ends["sse"]
    if fault == "drop mid-answer":
        assert [kind for kind, _, _ in ends["sse"]["segments"]] == ["initial", "reconcile"]
        assert ends["sse"]["disconnects"] == 1
    if fault == "429 before the stream":
        assert ends["sse"]["status"] == "error" and ends["sse"]["retries"] == 3


async def test_a_forgotten_chain_is_sent_again_with_the_whole_conversation(owner: Any, hub_over_websocket: Any
                                                                           ) -> None:
    first = await make_request(owner, "sim-text", background=False, text="Tell me a story")
    await StreamRunner(str(first.pk), get_hub()).run()
    second = await second_turn_after_a_forgotten_chain(await reload(first))
    runner = StreamRunner(str(second.pk), get_hub())
    await runner.run()
    saved = await reload(second)
    assert saved.status == "completed" and runner.view.meta.get("error") is None
    assert [(s.kind, s.outcome) for s in await segments_of(saved)] == [("initial", "http_404"),
                                                                        ("full_context", "completed")]
    assert hub_upstream().connections == 1, "both turns on one connection"


async def test_tool_rounds_continue_on_the_same_connection(owner: Any, simulator_url: str) -> None:
    upstream = WebSocketUpstream(base=simulator_url)
    saved, runner = await relay(owner, "websocket", simulator_url, "sim-function", upstream=upstream)
    assert saved.status == "completed"
    kinds = [s.kind for s in await segments_of(saved)]
    assert kinds == ["initial", "continuation"]
    assert upstream.connections == 1


async def test_a_background_request_goes_over_http_and_resumes_after_a_drop(owner: Any,
                                                                           simulator_url: str) -> None:
    upstream = WebSocketUpstream(base=simulator_url)
    saved, _ = await relay(owner, "websocket", simulator_url, "sim-text", {"sim.drop_after": "12", **PACED},
                           background=True, upstream=upstream)
    kinds = [(s.kind, s.outcome) for s in await segments_of(saved)]
    assert kinds == [("initial", "dropped"), ("resume", "completed")], "WebSocket mode has no background mode"
    assert saved.status == "completed" and upstream.connections == 0


async def test_the_connection_limit_rotates_the_connection_without_losing_a_turn(
        owner: Any, simulator_url: str, hub_over_websocket: Any) -> None:
    # The provider's limit comes first (0.3 s, the relay's own is 40 minutes), while a response streams.
    limit = {"sim.ws_max_age_s": "0.3", "sim.tokens_per_s": "60", "sim.tokens": "60"}
    request = await make_request(owner, "sim-long", limit, background=False)
    long = asyncio.get_running_loop().create_task(StreamRunner(str(request.pk), get_hub()).run())
    async with asyncio.timeout(10):
        while not (await reload(request)).response_id:
            await asyncio.sleep(0.02)
    old = hub_upstream().connection
    await asyncio.sleep(0.35)  # past the limit: the provider refuses new requests on this connection
    assert not long.done() and old is not None and old.closed is None
    second, _ = await relay(owner, "hub", simulator_url, "sim-text", text="Next")
    assert second.status == "completed" and second.retries == 0
    assert [s.kind for s in await segments_of(second)] == ["initial"], "refused, then sent on a new connection"
    # The refusal may come as a connection-level frame (no lane yet): counted as an orphan, and it is
    # what expires the connection; either way the turn went out once, on the new connection.
    assert hub_upstream().connections == 2
    await asyncio.wait_for(long, 30)
    first = await reload(request)
    assert first.status == "completed", "the response in flight when the limit came finished"
    assert old.closed is not None and old.closed[1] == "websocket_connection_limit_reached"


async def test_the_relay_rotates_an_old_connection_itself(owner: Any, simulator_url: str,
                                                          hub_over_websocket: Any) -> None:
    hub_over_websocket.RELAY_UPSTREAM_WS_MAX_AGE_S = 0.2
    request = await make_request(owner, "sim-long", {"sim.tokens_per_s": "80", "sim.tokens": "60"},
                                 background=False)
    long = asyncio.get_running_loop().create_task(StreamRunner(str(request.pk), get_hub()).run())
    async with asyncio.timeout(10):
        while not (await reload(request)).response_id:
            await asyncio.sleep(0.02)
    old = hub_upstream().connection
    await asyncio.sleep(0.25)  # past the relay's own limit, with the first stream still going
    assert not long.done()
    second, _ = await relay(owner, "hub", simulator_url, "sim-text", text="Other")
    await asyncio.wait_for(long, 30)
    first = await reload(request)
    assert first.status == "completed" and second.status == "completed", "the old connection's stream finished"
    assert hub_upstream().connections == 2
    assert old is not None and old.closed is not None, "closed after its last stream"


@pytest.mark.parametrize("transport", ["sse", "websocket"])
@pytest.mark.parametrize("ask", [True, False])
async def test_padding_is_asked_away_and_never_stored(owner: Any, settings: Any, simulator_url: str,
                                                      monkeypatch: pytest.MonkeyPatch, transport: str,
                                                      ask: bool) -> None:
    settings.RELAY_UPSTREAM_NO_OBFUSCATION = ask
    arrived: list[bool] = []
    feed, feed_event = Transcript.feed, Transcript.feed_event

    def seeing(method: Any) -> Any:
        def wrapper(self: Transcript, data: Any, now: float | None = None) -> Any:
            arrived.append(b"obfuscation" in (data if isinstance(data, bytes) else data.encode()))
            return method(self, data, now)
        return wrapper

    monkeypatch.setattr(Transcript, "feed", seeing(feed))
    monkeypatch.setattr(Transcript, "feed_event", seeing(feed_event))
    saved, _ = await relay(owner, transport, simulator_url, "sim-reasoning")
    assert saved.status == "completed"
    assert any(arrived) is not ask, "the simulator pads unless asked not to"
    log = await sync_to_async(selectors.event_log_text)(request_id=saved.pk)
    assert "response.output_text.delta" in log and "obfuscation" not in log

"""Real captures relayed over WebSocket mode (each event a frame, from a scripted provider on real
loopback) end as the same bytes over SSE do: the same outcome, view and counts. And the embedded
simulator is reached over WebSocket mode in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.streaming.sse import SSEDecoder
from responses_app.upstream.http import Upstream
from responses_app.upstream.websocket import WebSocketUpstream
from tests.conftest import REAL_STREAMS, real_stream_files, require_real_streams
from tests.relay.helpers import make_request, reload
from tests.relay.test_endings import segments_of
from tests.upstream.test_websocket import outcome
from tests.upstreams import Reply, scripted_upstream, scripted_websocket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

FILES = real_stream_files() or [REAL_STREAMS / "absent.sse"]


async def relay(owner: Any, upstream: Upstream) -> dict[str, Any]:
    request = await make_request(owner, "gpt-test", background=False)
    runner = StreamRunner(str(request.pk), get_hub(), upstream_factory=lambda: upstream)
    await runner.run()
    saved = await reload(request)
    return outcome(saved, runner, await segments_of(saved))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
async def test_a_capture_sent_as_frames_ends_as_its_sse_bytes(owner: Any, path: Path) -> None:
    require_real_streams()
    data = path.read_bytes()
    if b'"mcp_approval_request"' in data:
        pytest.skip("the request then waits for a person's answer (test_approvals.py)")
    decoder = SSEDecoder()
    payloads = [message.data for message in decoder.decode(data) + decoder.flush()]
    async with scripted_upstream({"POST /v1/responses": Reply(body=data)}) as http:
        over_sse = await relay(owner, Upstream(base=http.base, api_key=""))
        posts = [line for line, _ in http.requests if line.startswith("POST")]
    async with scripted_websocket(payloads) as ws:
        over_ws = await relay(owner, WebSocketUpstream(base=ws.base, api_key=""))
    assert over_ws == over_sse
    assert len(ws.creates) == len(posts), "one response.create per POST (a function call's rounds too)"
    assert not any("background" in create or "stream" in create for create in ws.creates)


async def test_the_embedded_simulator_is_reached_in_process(owner: Any, settings: Any) -> None:
    settings.SIMULATOR_BASE_URL = ""  # the embedded simulator, whatever address the server has
    upstream = WebSocketUpstream()
    request = await make_request(owner, "sim-function", background=False)
    runner = StreamRunner(str(request.pk), get_hub(), upstream_factory=lambda: upstream)
    await runner.run()
    saved = await reload(request)
    assert saved.status == "completed" and saved.final_text
    assert [s.kind for s in await segments_of(saved)] == ["initial", "continuation"]
    assert upstream.connections == 1, "the tool round went over the same in-process connection"

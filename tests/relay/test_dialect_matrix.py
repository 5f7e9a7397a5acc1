"""The dialect matrix, live: every `sim.dialect` × text, a function tool round and reasoning, from
the standalone simulator over real loopback HTTP through the runner to a websocket viewer. Each run
must give the plain run's text, its status and honest counters (nothing counted as a duplicate,
a gap or a malformed event for a stream that only speaks another dialect)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from responses_app import services
from responses_app.models import ResponseRequest
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.simulator.dialects import NAMES, NO_UPDATE
from responses_app.tools import tool_definitions
from responses_app.upstream.http import Upstream
from tests.conftest import REAL_STREAMS, require_real_streams
from tests.relay.helpers import FAST, Watcher, connect, reload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

SCENARIOS = ["sim-text", "sim-function", "sim-reasoning"]


@sync_to_async
def dialect_request(user: Any, model: str, dialect: str) -> ResponseRequest:
    conversation = services.conversation_create(owner=user)
    params: dict[str, Any] = {"background": False, "metadata": {**FAST, "sim.dialect": dialect}}
    if model == "sim-function":
        params["tools"] = tool_definitions()
    request, _ = services.request_create(
        owner=user, input="What's the weather in Paris?", model=model, client_request_id=str(uuid.uuid4()),
        conversation=conversation, params=params)
    return request


async def run(user: Any, model: str, dialect: str) -> tuple[ResponseRequest, Watcher]:
    request = await dialect_request(user, model, dialect)
    communicator = await connect(user, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    await watcher.until_terminal(40)
    await communicator.disconnect()
    return await reload(request), watcher


def counters(saved: ResponseRequest) -> tuple[int, int, int, int]:
    return saved.duplicates, saved.gaps, saved.malformed_events, saved.unknown_events


def texts(watcher: Watcher) -> list[str]:
    assert watcher.view is not None
    return [b.get("text", "") for b in watcher.view["blocks"] if b["kind"] in ("text", "reasoning")]


@pytest.mark.parametrize("model", SCENARIOS)
async def test_every_dialect_relays_the_plain_runs_answer(owner: Any, model: str) -> None:
    plain, plain_view = await run(owner, model, "openai")
    assert plain.status == "completed" and plain.final_text
    for dialect in NAMES[1:]:
        saved, watcher = await run(owner, model, dialect)
        assert (dialect, saved.status) == (dialect, "completed")
        assert (dialect, saved.final_text) == (dialect, plain.final_text)
        assert (dialect, texts(watcher)) == (dialect, texts(plain_view))
        assert (dialect, watcher.text()) == (dialect, saved.final_text)
        assert (dialect, counters(saved)) == (dialect, (0, 0, 0, 0))
        assert saved.events >= plain.events // 2
        if dialect == "litellm":
            assert len(saved.response_id) == 441  # whole: the core never cuts an id


async def test_a_completed_response_with_an_error_ends_failed_with_the_streamed_text(owner: Any) -> None:
    plain, _ = await run(owner, "sim-failed", "openai")
    saved, watcher = await run(owner, "sim-failed", "open-responses-server")
    assert plain.status == saved.status == "failed"
    assert saved.error_code == plain.error_code == "server_error"
    assert saved.final_text == plain.final_text and NO_UPDATE not in saved.final_text
    assert watcher.terminal is not None and watcher.terminal["status"] == "failed"
    assert NO_UPDATE not in watcher.text()


# --- the end of a stream applies what arrived -----------------------------------------------------


def cut_capture(share: float) -> bytes:
    require_real_streams()
    body = (REAL_STREAMS / "vercel-ai__phase-commentary-final-answer.sse").read_bytes()
    blocks = [block + b"\n\n" for block in body.split(b"\n\n") if block.strip()]
    return b"".join(blocks[:int(len(blocks) * share)])


@pytest.mark.parametrize("share", [0.6, 0.8])
async def test_a_stream_cut_behind_a_gap_ends_with_what_arrived(owner: Any, share: float) -> None:
    """No terminal event, and the provider cannot say how the response ended (retrieve: 404)."""
    body = cut_capture(share)

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
        return httpx.Response(404, json={"error": {"message": "No response found.", "type": "invalid_request_error",
                                                   "code": None, "param": None}})

    request = await dialect_request(owner, "sim-text", "openai")
    runner = StreamRunner(str(request.pk), get_hub(), lambda: Upstream(
        base="http://upstream.test/v1", api_key="", transport=httpx.MockTransport(handler)))
    await runner.run()
    saved = await reload(request)
    assert saved.status not in ("completed", "streaming")
    assert saved.final_text.startswith("Got it — I’ll quickly check reliable, up-to-date sources")
    assert saved.gaps >= 1


"""Every turn ends right: how streams end, over real loopback HTTP (a scripted provider serving
real captures byte for byte, and the standalone simulator)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx
import orjson
import pytest
from asgiref.sync import sync_to_async

from responses_app import selectors, submission
from responses_app.models import Conversation, ResponseRequest, Segment
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.upstream.http import Upstream
from tests.conftest import REAL_STREAMS, require_real_streams
from tests.relay.helpers import make_request, reload
from tests.relay.test_runner_faults import SIM_AUTH
from tests.streaming.test_limits import items_stream, sse
from tests.upstreams import Reply, scripted_upstream

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


def capture(name: str) -> bytes:
    require_real_streams()
    return (REAL_STREAMS / name).read_bytes()


async def relay(owner: Any, base: str, *, background: bool = False, model: str = "gpt-test"
                ) -> tuple[ResponseRequest, StreamRunner]:
    request = await make_request(owner, model, background=background)
    runner = StreamRunner(str(request.pk), get_hub(), upstream_factory=lambda: Upstream(base=base, api_key=""))
    await runner.run()
    return await reload(request), runner


@sync_to_async
def segments_of(request: ResponseRequest) -> list[Segment]:
    return list(Segment.objects.filter(request=request).order_by("index"))


def text_blocks(view: dict[str, Any]) -> list[str]:
    return [block["text"] for block in view["blocks"] if block["kind"] == "text"]


# --- the end of a stream ----------------------------------------------------------------------------


async def test_a_terminal_event_behind_a_gap_ends_the_request_at_the_close(owner: Any) -> None:
    # The capture skips output_index 1 and several sequence numbers: response.completed is held.
    body = capture("vercel-ai__phase-commentary-final-answer.sse")
    async with scripted_upstream({"POST /v1/responses": Reply(body=body)}) as upstream:
        saved, runner = await relay(owner, upstream.base)
        ended = asyncio.get_running_loop().time()
    assert saved.status == "completed"
    assert [s.kind for s in await segments_of(saved)] == ["initial"], "no resume, no reconcile"
    assert saved.terminal_at is not None and saved.upstream_created_at is not None
    assert 0 < ended - upstream.last_byte_at < 1.0, "ended within a second of its last byte"
    final = orjson.loads(body.split(b"data: ")[-1])["response"]["output"]
    answers = [part["text"] for item in final for part in item["content"]]
    shown = text_blocks(runner.view.to_dict())
    assert shown == answers, "each answer shown once, in order"
    assert saved.final_text == "\n\n".join(answers)


@pytest.mark.parametrize("delivery", ["whole", "bytewise", "paced"])
async def test_an_error_event_followed_by_response_failed_ends_failed(owner: Any, delivery: str) -> None:
    body = capture("vercel-ai__error-insufficient-quota-then-failed.sse")
    reply = {"whole": Reply(body=body), "bytewise": Reply(body=body, chunk_size=1),
             "paced": Reply(body=body, pause_before=b'data: {"type":"response.failed"', pause_before_s=0.5)}[delivery]
    async with scripted_upstream({"POST /v1/responses": reply}) as upstream:
        saved, _runner = await relay(owner, upstream.base)
    assert saved.status == "failed", "the later response.failed is authoritative"
    assert saved.error_code == "insufficient_quota"


async def test_an_error_event_alone_ends_error_after_a_short_grace(owner: Any) -> None:
    body = capture("vercel-ai__error-insufficient-quota-then-failed.sse")
    only_error = b"".join(block + b"\n\n" for block in body.split(b"\n\n")
                          if block.strip() and b'"response.failed"' not in block)
    async with scripted_upstream({"POST /v1/responses": Reply(body=only_error)}) as upstream:
        saved, _runner = await relay(owner, upstream.base)
    assert saved.status == "error" and saved.error_code == "insufficient_quota"


# --- failures before any stream ---------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed when the socket is: nothing listens there


async def test_a_refused_connection_is_an_error_with_its_reason_not_unknown(owner: Any) -> None:
    saved, runner = await relay(owner, f"http://127.0.0.1:{closed_port()}/v1")
    assert saved.status == "error"
    assert saved.error_code == "upstream_refused"
    assert "refused" in saved.error_message and "Nothing was sent" in saved.error_message
    meta = runner.view.meta
    assert meta["status"] == "error" and meta["error"]["code"] == "upstream_refused", "the page shows the reason"


async def test_an_unresolvable_host_is_an_error_with_its_reason(owner: Any) -> None:
    saved, _runner = await relay(owner, "http://no-such-host.invalid/v1")
    assert saved.status == "error" and saved.error_code in ("upstream_dns", "upstream_unreachable")
    assert "no-such-host.invalid" in saved.error_message


@pytest.mark.parametrize(("status", "code"), [
    (401, "upstream_unauthorized"), (403, "upstream_forbidden"), (404, "upstream_not_found"),
    (429, "rate_limited"), (503, "upstream_unavailable"), (400, "upstream_rejected"),
])
async def test_http_refusals_are_errors_with_a_specific_code(owner: Any, settings: Any, status: int, code: str,
                                                             monkeypatch: Any) -> None:
    monkeypatch.setattr(asyncio, "sleep", _no_wait(asyncio.sleep))  # retries of 429/5xx without waiting
    body = orjson.dumps({"error": {"message": "nope", "type": "x", "code": None}})
    async with scripted_upstream({"POST /v1/responses": Reply(status, body, "application/json")}) as upstream:
        saved, runner = await relay(owner, upstream.base)
    assert saved.status == "error"
    assert saved.error_code == code
    assert f"HTTP {status}" in saved.error_message and "nope" in saved.error_message
    assert runner.view.meta["error"]["code"] == code
    posts = [line for line, _ in upstream.requests if line.startswith("POST")]
    assert len(posts) == (4 if status in (429, 503) else 1), "429/5xx retried, the rest not"


def _no_wait(sleep: Any) -> Any:
    async def quick(delay: float, *args: Any) -> Any:
        return await sleep(0, *args)
    return quick


async def test_a_connection_lost_after_the_request_is_unknown_with_a_reason(owner: Any) -> None:
    # Headers, then the connection closes before response.created: the upstream may have run it.
    async with scripted_upstream({"POST /v1/responses": Reply(body=b": keep-alive\n\n")}) as upstream:
        saved, runner = await relay(owner, upstream.base)
    assert saved.status == "unknown"
    assert runner.view.meta["error"]["code"] == "outcome_unknown"


# --- the deadline -----------------------------------------------------------------------------------


async def test_the_request_deadline_cancels_and_ends_incomplete_keeping_the_text(owner: Any, settings: Any,
                                                                                 simulator_url: str) -> None:
    settings.RELAY_REQUEST_DEADLINE_S = 1
    request = await make_request(owner, "sim-long", {"sim.tokens": "400", "sim.tokens_per_s": "40"},
                                 background=True)
    runner = StreamRunner(str(request.pk), get_hub())
    await asyncio.wait_for(runner.run(), 20)
    saved = await reload(request)
    assert saved.status == "incomplete" and saved.incomplete_reason == "deadline"
    assert saved.final_text, "what was shown is kept"
    assert runner.view.meta["incomplete_reason"] == "deadline"
    async with httpx.AsyncClient(headers=SIM_AUTH) as client:
        upstream = (await client.get(f"{simulator_url}/responses/{saved.response_id}")).json()
    assert upstream["status"] == "cancelled", "the upstream was told to stop"


# --- the conversation's chain -----------------------------------------------------------------------


@sync_to_async
def second_turn_after_a_forgotten_chain(first: ResponseRequest) -> ResponseRequest:
    conversation = Conversation.objects.get(pk=first.conversation_id)
    assert conversation.last_response_id == first.response_id
    # As after a restart of the embedded simulator, or a provider's expiry: the upstream no longer
    # has the branch's last answer, which the next turn chains to.
    ResponseRequest.objects.filter(pk=first.pk).update(response_id="resp_forgotten")
    done = submission.submit(
        user=first.owner, data={"input": "And now?", "model": "sim-text", "conversation": str(conversation.pk),
                                "client_request_id": "turn-2", "background": "false",
                                "metadata": orjson.dumps({"sim.tokens_per_s": "0"}).decode()})
    assert done.created
    return done.request


async def test_a_forgotten_chain_is_retried_once_with_the_whole_conversation(owner: Any, simulator_url: str) -> None:
    first = await make_request(owner, "sim-text", background=False, text="Tell me a story")
    await StreamRunner(str(first.pk), get_hub()).run()
    first = await reload(first)
    assert first.status == "completed"
    second = await second_turn_after_a_forgotten_chain(first)
    runner = StreamRunner(str(second.pk), get_hub())
    await runner.run()
    saved = await reload(second)
    assert saved.status == "completed", "shown to nobody as an error"
    assert runner.view.meta.get("error") is None
    segments = await segments_of(saved)
    assert [(s.kind, s.outcome) for s in segments] == [("initial", "http_404"), ("full_context", "completed")]
    assert "not found" in segments[0].detail.lower()
    async with httpx.AsyncClient(headers=SIM_AUTH) as client:
        sent = (await client.get(f"{simulator_url}/responses/{saved.response_id}")).json()
    assert sent["previous_response_id"] is None
    conversation = await sync_to_async(Conversation.objects.get)(pk=first.conversation_id)
    assert conversation.last_response_id == saved.response_id, "the chain is repaired"
    count = await sync_to_async(ResponseRequest.objects.filter(conversation_id=first.conversation_id).count)()
    assert count == 2, "one logical request per turn, the retry included"


async def test_the_full_context_is_the_conversations_turns_as_input_items(owner: Any) -> None:
    from responses_app import selectors

    first = await make_request(owner, "sim-text", background=False, text="Tell me a story")
    await StreamRunner(str(first.pk), get_hub()).run()
    first = await reload(first)
    second = await second_turn_after_a_forgotten_chain(first)
    context = await sync_to_async(selectors.conversation_context)(request=second)
    assert context == [{"role": "user", "content": "Tell me a story"},
                       {"role": "assistant", "content": first.final_text}]


# --- the relay's own writes ---------------------------------------------------------------------------


async def test_a_request_whose_writes_fail_for_good_ends_error_not_streaming(owner: Any, monkeypatch: Any) -> None:
    from responses_app.relay.checkpoint_writer import CheckpointNotWritten

    hub = get_hub()
    real_submit = hub.writer.submit

    def refusing(request_id: Any, state: Any, batch: Any) -> Any:
        if state is not None and state.reason == "interval":  # the database refuses this request's rows
            future = asyncio.get_running_loop().create_future()
            future.set_exception(CheckpointNotWritten(request_id, ValueError("refused")))
            return future
        return real_submit(request_id, state, batch)

    monkeypatch.setattr(hub.writer, "submit", refusing)
    request = await make_request(owner, "sim-long", {"sim.tokens": "300", "sim.tokens_per_s": "100"},
                                 background=False)
    await asyncio.wait_for(StreamRunner(str(request.pk), hub).run(), 30)
    saved = await reload(request)
    assert saved.status == "error" and saved.error_code == "checkpoint_failed"
    assert "stopped" in saved.error_message


# --- a bound on output items ----------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [None, 512])
async def test_more_output_items_than_the_bound_end_incomplete(owner: Any, settings: Any,
                                                              chunk_size: int | None) -> None:
    settings.RELAY_MAX_OUTPUT_ITEMS = 10
    body = sse(items_stream(60))
    async with scripted_upstream({"POST /v1/responses": Reply(body=body, chunk_size=chunk_size)}) as upstream:
        saved, runner = await relay(owner, upstream.base)
    assert saved.status == "incomplete" and saved.incomplete_reason == "max_output_items"
    assert runner.view.meta["incomplete_reason"] == "max_output_items"
    assert len(runner.view.to_dict()["blocks"]) == 10
    committed = await sync_to_async(selectors.view_latest)(request=saved)
    assert [b["id"] for b in committed["blocks"]] == [f"o{i}-c0" for i in range(10)]
    assert saved.final_text == "\n\n".join(["hi "] * 10)


async def test_a_stop_while_the_segment_is_written_still_stops(owner: Any, monkeypatch: Any) -> None:
    """Stop pressed between the runner's start and its reader's (while the segment's row is
    written): nothing is read, and the request ends cancelled at once, not when the answer ends."""
    from responses_app import services

    request = await make_request(owner, "sim-long", {"sim.tokens_per_s": "5"}, background=False)
    runner = StreamRunner(str(request.pk), get_hub())
    loop = asyncio.get_running_loop()
    segment_start = services.segment_start

    def stop_meanwhile(**kwargs: Any) -> Any:
        loop.call_soon_threadsafe(runner.cancel)  # lands before the write's result does
        return segment_start(**kwargs)

    monkeypatch.setattr(services, "segment_start", stop_meanwhile)
    await asyncio.wait_for(runner.run(), 10)
    saved = await reload(request)
    assert saved.status == "cancelled" and not saved.final_text

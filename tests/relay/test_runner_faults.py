"""Outcomes under upstream faults, end to end: simulator over real HTTP -> runner -> websocket."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from responses_app import selectors, services
from responses_app.models import EventRecord, ResponseRequest, Segment
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.simulator.auth import DEV_API_KEY
from responses_app.streaming.replay import replay_bytes
from responses_app.upstream.http import Upstream
from tests.relay.helpers import Watcher, connect, make_request, reload

SIM_AUTH = {"authorization": f"Bearer {DEV_API_KEY}"}  # what the standalone simulator demands

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def run_to_end(user: Any, model: str, metadata: dict[str, str], background: bool = True,
                     timeout: float = 40) -> tuple[ResponseRequest, Watcher]:
    request = await make_request(user, model, metadata, background=background)
    communicator = await connect(user, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    await watcher.until_terminal(timeout)
    await communicator.disconnect()
    return await reload(request), watcher


@sync_to_async
def segments_of(request: ResponseRequest) -> list[Segment]:
    return list(Segment.objects.filter(request=request).order_by("index"))


async def test_dropped_background_stream_resumes_after_last_sequence(owner: Any) -> None:
    saved, watcher = await run_to_end(owner, "sim-text", {"sim.drop_after": "12"})
    assert saved.status == "completed"
    segments = await segments_of(saved)
    assert [s.kind for s in segments][:2] == ["initial", "resume"]
    assert segments[0].outcome == "dropped" and segments[1].starting_after is not None
    assert saved.disconnects == 1 and saved.retries >= 1
    assert saved.duplicates == 0 and saved.gaps == 0
    assert watcher.text() == saved.final_text


async def test_dropped_foreground_stream_is_reconciled_with_the_upstream(owner: Any, simulator_url: str) -> None:
    saved, watcher = await run_to_end(owner, "sim-text", {"sim.drop_after": "12"}, background=False)
    segments = await segments_of(saved)
    assert segments[0].outcome == "dropped"
    assert segments[-1].kind == "reconcile", "a closed socket is never taken as success"
    async with httpx.AsyncClient(headers=SIM_AUTH) as client:
        truth = (await client.get(f"{simulator_url}/responses/{saved.response_id}")).json()
    assert saved.status == truth["status"]
    assert watcher.terminal is not None and watcher.terminal["status"] == saved.status
    if saved.status == "completed":
        assert watcher.text() == truth["output"][0]["content"][0]["text"]


def fixture_events(name: str) -> list[bytes]:
    body = (Path(__file__).resolve().parents[1] / "fixtures" / "sim" / name).read_bytes()
    return [block + b"\n\n" for block in body.split(b"\n\n") if block.strip()]


def mock_upstream(blocks: list[bytes], retrieve: httpx.Response) -> Any:
    """An upstream that streams `blocks`, then closes without a terminal event."""

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b"".join(blocks))
        return retrieve

    return lambda: Upstream(base="http://upstream.test/v1", api_key="", transport=httpx.MockTransport(handler))


async def run_runner(user: Any, factory: Any, background: bool = False) -> tuple[ResponseRequest, StreamRunner]:
    request = await make_request(user, "sim-text", background=background)
    hub = get_hub()
    runner = StreamRunner(str(request.pk), hub, upstream_factory=factory)
    await runner.run()
    return await reload(request), runner


async def test_dropped_stream_that_cannot_be_reconciled_is_unknown(owner: Any) -> None:
    blocks = fixture_events("sim-text.sse")[:8]
    saved, runner = await run_runner(owner, mock_upstream(blocks, httpx.Response(503, json={"error": {}})))
    assert saved.status == "unknown"
    assert saved.response_id, "the id was stored before the drop"
    assert runner.view.meta["status"] == "unknown"
    assert [s.outcome for s in await segments_of(saved)][0] == "dropped"
    # The page says why, not just "unknown": the stream broke off and the provider could not say.
    assert saved.error_code == "outcome_unknown"
    assert "broke off" in saved.error_message and "HTTP 503" in saved.error_message


async def test_a_response_the_provider_forgot_is_unknown_and_says_so(owner: Any) -> None:
    blocks = fixture_events("sim-text.sse")[:8]
    saved, runner = await run_runner(owner, mock_upstream(blocks, httpx.Response(404, json={"error": {}})))
    assert saved.status == "unknown" and saved.error_code == "outcome_unknown"
    assert "no longer knows this response" in saved.error_message
    assert runner.view.meta["error"]["code"] == "outcome_unknown"


async def test_a_takeover_before_the_provider_confirmed_is_unknown_never_resent(owner: Any) -> None:
    """The runner before died after its POST went out but before `response.created`: it may have
    run upstream, so it is not sent again, and the page says so."""
    request = await make_request(owner, "sim-text")
    await sync_to_async(services.segment_start)(request_id=request.pk, index=0, kind="initial")
    sent: list[str] = []

    async def handler(http: httpx.Request) -> httpx.Response:
        sent.append(http.method)
        return httpx.Response(500)

    runner = StreamRunner(str(request.pk), get_hub(), upstream_factory=lambda: Upstream(
        base="http://upstream.test/v1", api_key="", transport=httpx.MockTransport(handler)))
    await runner.run()
    saved = await reload(request)
    assert saved.status == "unknown" and sent == [], "nothing is sent again"
    assert saved.error_code == "outcome_unknown" and "not sent again" in saved.error_message


async def test_dropped_stream_reconciled_from_the_final_response(owner: Any) -> None:
    blocks = fixture_events("sim-text.sse")
    final = json.loads(blocks[-1].decode().split("data: ", 1)[1])["response"]
    saved, runner = await run_runner(owner, mock_upstream(blocks[:8], httpx.Response(200, json=final)))
    assert saved.status == "completed"
    assert saved.final_text == final["output"][0]["content"][0]["text"]
    assert saved.usage == final["usage"]


async def test_http_429_is_retried_then_reported_as_error(owner: Any) -> None:
    saved, watcher = await run_to_end(owner, "sim-text", {"sim.http_error": "429"})
    assert saved.status == "error"
    assert saved.retries == 3
    assert saved.error_code
    assert saved.response_id == ""
    assert watcher.view is not None and watcher.view["meta"]["status"] == "error"
    # Each retry is in the view as it happens, for a page to say "Retrying (429, 2 of 3)".
    retries = [op[1]["retry"] for m in watcher.messages if m["type"] == "patch" for op in m["ops"]
               if isinstance(op, list) and op[0] == "meta" and "retry" in op[1]]
    snapshot = watcher.messages[0]["view"]["meta"].get("retry")
    seen = [r["attempt"] for r in ([snapshot] if snapshot else []) + retries]
    assert seen and sorted(set(seen)) == list(range(min(seen), 4)), seen
    assert watcher.view["meta"]["retry"] == {"status": 429, "attempt": 3, "of": 3}


async def test_a_retry_that_gets_through_clears_the_retry_from_the_view() -> None:
    from responses_app.streaming.transcript import Transcript

    transcript = Transcript()
    ops = transcript.retrying(503, 1, 3)
    assert ops.ops == [["meta", {"retry": {"status": 503, "attempt": 1, "of": 3}}]]
    assert transcript.retry_over().ops == [["meta", {"retry": None}]]
    assert transcript.retry_over().ops == [], "nothing to clear twice"


async def test_failed_after_visible_text_keeps_the_text(owner: Any) -> None:
    saved, watcher = await run_to_end(owner, "sim-text", {"sim.fail_at": "15"})
    assert saved.status == "failed"
    assert saved.error_message
    assert watcher.text(), "text shown before the failure stays"


async def test_error_event_is_an_error_outcome(owner: Any) -> None:
    saved, _ = await run_to_end(owner, "sim-text", {"sim.error_at": "10"})
    assert saved.status in ("error", "failed")
    assert saved.error_code or saved.error_message


async def test_incomplete_keeps_partial_text_and_reason(owner: Any) -> None:
    saved, watcher = await run_to_end(owner, "sim-incomplete", {})
    assert saved.status == "incomplete"
    assert saved.incomplete_reason == "max_output_tokens"
    assert watcher.text()


async def test_malformed_and_unknown_events_are_counted_not_fatal(owner: Any) -> None:
    saved, _ = await run_to_end(owner, "sim-text", {"sim.malformed_at": "6", "sim.unknown_at": "8"})
    assert saved.status == "completed"
    assert saved.malformed_events == 1
    assert saved.unknown_events == 1


async def test_duplicated_events_do_not_corrupt_the_answer(owner: Any) -> None:
    plain, _ = await run_to_end(owner, "sim-text", {})
    doubled, _ = await run_to_end(owner, "sim-text", {"sim.duplicate": "true"})
    assert doubled.status == "completed"
    assert doubled.final_text == plain.final_text
    assert doubled.duplicates == doubled.events


async def test_stall_with_keepalives_is_not_a_drop(owner: Any) -> None:
    saved, _ = await run_to_end(owner, "sim-text", {"sim.stall_at": "10", "sim.stall_ms": "600",
                                                    "sim.keepalive_ms": "100"})
    assert saved.status == "completed"
    assert saved.disconnects == 0


async def test_usage_comes_from_the_terminal_response(owner: Any) -> None:
    saved, _ = await run_to_end(owner, "sim-text", {})
    assert saved.usage and saved.usage["output_tokens"] > 0


async def test_event_log_replays_to_the_same_outcome(owner: Any) -> None:
    saved, _ = await run_to_end(owner, "sim-citations", {})
    data = await sync_to_async(lambda: selectors.event_log_text(request_id=saved.pk))()
    result = replay_bytes(data.encode())
    assert result.terminal and result.status == saved.status
    assert result.events == saved.events


async def test_single_flight_lease(owner: Any) -> None:
    request = await make_request(owner, "sim-text")
    import uuid

    first = await sync_to_async(services.request_acquire_lease)(request_id=request.pk, token=uuid.uuid4())
    second = await sync_to_async(services.request_acquire_lease)(request_id=request.pk, token=uuid.uuid4())
    assert first and not second


async def test_a_dead_runner_is_recovered_from_the_event_log_without_a_second_post(
        owner: Any, simulator_url: str) -> None:
    import asyncio
    import contextlib
    from datetime import timedelta

    from django.utils import timezone

    from responses_app.models import Checkpoint

    request = await make_request(owner, "sim-long", {"sim.tokens_per_s": "300", "sim.tokens": "900"}, background=True)
    hub = get_hub()
    first = StreamRunner(str(request.pk), hub)
    task = asyncio.get_running_loop().create_task(first.run())
    async with asyncio.timeout(20):
        while not await sync_to_async(Checkpoint.objects.filter(request=request, revision__gt=5).exists)():
            await asyncio.sleep(0.05)
    task.cancel()  # the process dies mid-stream: no terminal write, the lease stays
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await sync_to_async(ResponseRequest.objects.filter(pk=request.pk).update)(
        lease_expires=timezone.now() - timedelta(seconds=1))

    second = StreamRunner(str(request.pk), hub)
    await second.run()
    saved = await reload(request)
    assert saved.status == "completed"
    async with httpx.AsyncClient(headers=SIM_AUTH) as client:
        truth = (await client.get(f"{simulator_url}/responses/{saved.response_id}")).json()
    assert saved.final_text == truth["output"][0]["content"][0]["text"]
    kinds = [s.kind for s in await segments_of(saved)]
    assert kinds.count("initial") == 1 and "resume" in kinds, kinds


async def test_a_stream_that_goes_quiet_is_committed_within_the_interval(owner: Any) -> None:
    import asyncio

    from responses_app.models import Checkpoint

    blocks = fixture_events("sim-text.sse")[:10]
    release = asyncio.Event()

    async def body() -> Any:
        for block in blocks:
            yield block
        await release.wait()  # the upstream goes silent without closing

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    request = await make_request(owner, "sim-text", background=False)
    runner = StreamRunner(str(request.pk), get_hub(), upstream_factory=lambda: Upstream(
        base="http://upstream.test/v1", api_key="", transport=httpx.MockTransport(handler)))
    task = asyncio.get_running_loop().create_task(runner.run())
    try:
        async with asyncio.timeout(10):
            while True:
                logged = await sync_to_async(lambda: sum(
                    EventRecord.objects.filter(request=request).values_list("count", flat=True)))()
                if logged == len(blocks):
                    break
                await asyncio.sleep(0.02)
        latest = await sync_to_async(Checkpoint.objects.filter(request=request).order_by("-revision").first)()
        assert latest is not None and latest.revision == runner.view.revision
        assert latest.sequence_number == len(blocks) - 1
    finally:
        runner.cancel()
        release.set()
        await task

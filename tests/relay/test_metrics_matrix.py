"""The proof of the metrics: a fault matrix against the simulator over real loopback HTTP (every
outcome: completed, failed, incomplete, error, dropped and resumed, dropped and reconciled,
cancelled, unknown; tools; duplicates, unknown and malformed events), watched over websockets,
then /metrics scraped and held to the database: each logical request counted once under its
status and model, and every counter equal to the sum of its column."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db.models import Count, Sum
from django.test import AsyncClient

from responses_app.models import ResponseRequest
from responses_app.ops import metrics
from responses_app.relay.hub import get_hub
from tests.metrics_helpers import Samples, delta, parse, total, value
from tests.relay.helpers import Watcher, connect, make_request
from tests.relay.test_runner_faults import fixture_events, mock_upstream, run_runner, run_to_end

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def scrape() -> Samples:
    response = await AsyncClient().get("/metrics")
    assert response.status_code == 200
    return parse(response.content.decode())


def seeded(seed: int, metadata: dict[str, str] | None = None) -> dict[str, str]:
    """Concurrent requests need seeds of their own: the same seed gives the same response ids."""
    return {"sim.seed": str(100 + seed), **(metadata or {})}


async def cancelled_midway(user: Any) -> None:
    request = await make_request(user, "sim-long", seeded(10, {"sim.tokens_per_s": "60", "sim.tokens": "600"}))
    communicator = await connect(user, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    async with asyncio.timeout(20):
        while not (watcher.view and watcher.text()):
            await watcher.receive()
    await communicator.send_to(text_data='{"type":"cancel"}')
    terminal = await watcher.until_terminal()
    assert terminal["status"] == "cancelled"
    await communicator.disconnect()


@sync_to_async
def database() -> dict[str, Any]:
    rows = ResponseRequest.objects.all()
    sums = rows.aggregate(**{name: Sum(name) for name in (
        "retries", "disconnects", "viewer_connections", "cancels", "events", "duplicates", "gaps",
        "unknown_events", "malformed_events")})
    return {
        "by_status": dict(rows.values_list("status").annotate(n=Count("id"))),
        "by_model": dict(rows.values_list("model").annotate(n=Count("id"))),
        "sums": {k: v or 0 for k, v in sums.items()},
        "ended": rows.filter(status__in=ResponseRequest.ENDED).count(),
        "created": rows.filter(upstream_created_at__isnull=False).count(),
        "first_text": rows.filter(first_text_at__isnull=False).count(),
        "first_tool": rows.filter(first_tool_at__isnull=False).count(),
    }


async def gauge_settles(name: str, expected: float) -> None:
    try:
        async with asyncio.timeout(10):
            while value(await scrape(), name) != expected:
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"{name} stayed at {value(await scrape(), name)}, not {expected}") from None


async def no_runner_left() -> None:
    """A runner an earlier test let run on ends during this one: the gauges' baseline waits for it."""
    async with asyncio.timeout(30):
        while get_hub().leases.runners:
            await asyncio.sleep(0.05)


async def test_metrics_after_a_fault_matrix_match_the_database(owner: Any) -> None:
    await no_runner_left()
    before = await scrape()
    in_flight, viewers = value(before, "relay_streams_in_flight"), value(before, "relay_viewers")
    blocks = fixture_events("sim-text.sse")[:8]
    lost = mock_upstream(blocks, httpx.Response(503, json={"error": {}}))
    outcomes = await asyncio.gather(
        run_to_end(owner, "sim-text", seeded(1)),
        run_to_end(owner, "sim-citations", seeded(2, {"sim.duplicate": "true"})),
        run_to_end(owner, "sim-text", seeded(3, {"sim.malformed_at": "6", "sim.unknown_at": "8"})),
        run_to_end(owner, "sim-function", seeded(4)),
        run_to_end(owner, "sim-text", seeded(5, {"sim.fail_at": "15"})),
        run_to_end(owner, "sim-incomplete", seeded(6)),
        run_to_end(owner, "sim-text", seeded(7, {"sim.http_error": "429"})),
        run_to_end(owner, "sim-text", seeded(8, {"sim.drop_after": "12"})),
        run_to_end(owner, "sim-text", seeded(9, {"sim.drop_after": "12"}), background=False),
        run_runner(owner, lost),
        cancelled_midway(owner),
    )
    statuses = [saved.status for saved, _ in outcomes[:9]]
    assert statuses[:8] == ["completed", "completed", "completed", "completed", "failed", "incomplete",
                            "error", "completed"]
    assert outcomes[9][0].status == "unknown"
    await gauge_settles("relay_streams_in_flight", in_flight)  # every runner has let its lease go
    await gauge_settles("relay_viewers", viewers)
    after = await scrape()
    db = await database()

    by_status = {status: delta(after, before, "relay_requests_total", status=status)
                 for status in ResponseRequest.Status.values}
    assert {s: n for s, n in by_status.items() if n} == db["by_status"], "each request counted once, by status"
    assert {m: delta(after, before, "relay_requests_total", model=m) for m in db["by_model"]} == db["by_model"]
    assert delta(after, before, "relay_requests_total") == len(outcomes) == db["ended"]
    assert delta(after, before, "relay_request_duration_seconds_count") == db["ended"]
    assert delta(after, before, "relay_time_to_created_seconds_count") == db["created"]
    assert delta(after, before, "relay_time_to_first_token_seconds_count") == db["first_text"]
    assert delta(after, before, "relay_time_to_first_tool_event_seconds_count") == db["first_tool"] >= 1

    sums = db["sums"]
    for metric, column in [("relay_retries_total", "retries"), ("relay_stream_disconnects_total", "disconnects"),
                           ("relay_viewer_connections_total", "viewer_connections"),
                           ("relay_cancels_total", "cancels"), ("relay_upstream_events_total", "events"),
                           ("relay_duplicate_events_total", "duplicates"), ("relay_sequence_gaps_total", "gaps"),
                           ("relay_unknown_events_total", "unknown_events"),
                           ("relay_malformed_events_total", "malformed_events")]:
        assert delta(after, before, metric) == sums[column], metric
    # The matrix really exercised them (a counter stuck at zero would match a zero column).
    assert sums["retries"] >= 4 and sums["disconnects"] >= 2 and sums["cancels"] == 1
    assert sums["duplicates"] > 0 and sums["unknown_events"] == 1 and sums["malformed_events"] == 1
    assert sums["viewer_connections"] == 10 and sums["events"] > 100

    lag_count = delta(after, before, "relay_patch_lag_seconds_count")
    assert lag_count >= 10, "every watched stream's patches were sampled"
    assert 0 < delta(after, before, "relay_patch_lag_seconds_sum") / lag_count < 2.0
    assert total(after, "relay_event_loop_lag_seconds") >= 0


async def test_a_request_taken_over_is_counted_once(owner: Any) -> None:
    """Two runners for one request: the one holding the lease ends it; the other's terminal write
    changes no row and counts nothing."""
    from responses_app import services

    before = await scrape()
    request = await make_request(owner, "sim-text")
    import uuid

    from django.utils import timezone

    first, second = uuid.uuid4(), uuid.uuid4()
    assert await sync_to_async(services.request_acquire_lease)(request_id=request.pk, token=first)
    ended = await sync_to_async(services.request_mark_terminal)(
        request_id=request.pk, token=first, status="completed", at=timezone.now())
    again = await sync_to_async(services.request_mark_terminal)(
        request_id=request.pk, token=second, status="unknown", at=timezone.now())
    stale = await sync_to_async(services.request_mark_terminal)(
        request_id=request.pk, token=None, status="failed", at=timezone.now())
    assert (ended, again, stale) == (True, False, False)
    after = await scrape()
    assert delta(after, before, "relay_requests_total") == 1
    assert delta(after, before, "relay_requests_total", status="completed", model="sim-text") == 1
    assert delta(after, before, "relay_request_duration_seconds_count") == 1


async def test_a_resync_is_counted_and_the_first_snapshot_is_not(owner: Any) -> None:
    before = await scrape()
    request = await make_request(owner, "sim-long", {"sim.tokens_per_s": "100", "sim.tokens": "150"})
    communicator = await connect(owner, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    first = await watcher.receive()
    assert first["type"] == "snapshot"
    await communicator.send_to(text_data='{"type":"snapshot"}')
    async with asyncio.timeout(20):
        while sum(m["type"] == "snapshot" for m in watcher.messages) < 2:
            await watcher.receive()
    await watcher.until_terminal()
    await communicator.disconnect()
    after = await scrape()
    assert delta(after, before, "relay_viewer_resyncs_total") == sum(
        m["type"] == "snapshot" for m in watcher.messages) - 1 >= 1


def test_the_documented_metric_names_are_served() -> None:
    text = metrics.render().decode()
    for name in ["relay_time_to_created_seconds", "relay_time_to_first_token_seconds",
                 "relay_time_to_first_tool_event_seconds", "relay_request_duration_seconds",
                 "relay_patch_lag_seconds", "relay_requests_total", "relay_upstream_events_total",
                 "relay_duplicate_events_total", "relay_sequence_gaps_total", "relay_unknown_events_total",
                 "relay_stream_disconnects_total", "relay_retries_total", "relay_cancels_total",
                 "relay_viewer_connections_total", "relay_viewer_resyncs_total", "relay_safety_verdicts_total",
                 "relay_streams_in_flight", "relay_viewers", "relay_event_loop_lag_seconds"]:
        assert f"# HELP {name} " in text, name
    json.dumps(text)  # plain text

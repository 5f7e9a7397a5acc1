"""How often a streaming answer is written: checkpoints by time and by amount, event batches by size."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from responses_app import selectors
from responses_app.models import Checkpoint, EventRecord
from responses_app.relay import eventlog
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.streaming.replay import replay_bytes
from tests.relay.helpers import make_request, reload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

# sim-long: one text delta per token, plus a few lifecycle and boundary events
TOKENS = 240


@sync_to_async
def writes_of(request: Any) -> tuple[list[str], list[tuple[int, int | None, int | None]]]:
    reasons = list(Checkpoint.objects.filter(request=request).order_by("revision").values_list("reason", flat=True))
    batches = list(EventRecord.objects.filter(request=request).order_by("id").values_list(
        "count", "first_sequence", "last_sequence"))
    return reasons, batches


async def run(owner: Any, pace: int) -> tuple[Any, StreamRunner]:
    request = await make_request(owner, "sim-long", {"sim.tokens": str(TOKENS), "sim.tokens_per_s": str(pace)},
                                 background=False)
    runner = StreamRunner(str(request.pk), get_hub())
    await runner.run()
    return await reload(request), runner


async def test_a_slow_stream_is_checkpointed_by_amount_not_every_interval(owner: Any, settings: Any) -> None:
    # 240 deltas at 80/s take 3 s: every 300 ms would be 10 interval checkpoints; 64 events, 3 or 4.
    # A pause of one interval is a quiet stream, checkpointed by right: at 100 ms the pauses of a
    # busy CI machine (two suites and PostgreSQL at once) took a fifth one.
    settings.RELAY_CHECKPOINT_INTERVAL_MS = 300
    settings.RELAY_CHECKPOINT_MIN_EVENTS = 64
    settings.RELAY_CHECKPOINT_MAX_INTERVAL_MS = 10_000
    saved, runner = await run(owner, pace=80)
    assert saved.status == "completed"
    reasons, batches = await writes_of(saved)
    # By amount: at most one per 64 events (plus one per max interval, should a busy machine stretch it).
    most = saved.events // 64 + 1 + saved.duration_ms // 10_000
    assert 2 <= reasons.count("interval") <= most, (reasons, saved.events, saved.duration_ms)
    latest = await sync_to_async(Checkpoint.objects.filter(request=saved).order_by("-revision").first)()
    assert latest is not None and latest.revision == runner.view.revision
    assert len(batches) <= len(reasons) + 1
    assert sum(count for count, _first, _last in batches) == saved.events


async def test_the_max_interval_bounds_how_stale_a_slow_stream_gets(owner: Any, settings: Any) -> None:
    settings.RELAY_CHECKPOINT_INTERVAL_MS = 300
    settings.RELAY_CHECKPOINT_MIN_EVENTS = 10_000
    settings.RELAY_CHECKPOINT_MAX_INTERVAL_MS = 600
    saved, _runner = await run(owner, pace=80)
    reasons, _batches = await writes_of(saved)
    # About 3 s at one per 600 ms; bounded by the time it really took (a busy machine stretches it).
    expected = saved.duration_ms / 600
    assert max(2, expected - 3) <= reasons.count("interval") <= expected + 1, (reasons, saved.duration_ms)


async def test_a_fast_stream_hands_its_log_over_in_bounded_batches(owner: Any, settings: Any,
                                                                   monkeypatch: Any) -> None:
    monkeypatch.setattr(eventlog, "LOG_FLUSH_BYTES", 4096)
    settings.RELAY_CHECKPOINT_INTERVAL_MS = 60_000
    settings.RELAY_CHECKPOINT_MAX_INTERVAL_MS = 60_000
    saved, runner = await run(owner, pace=0)
    assert saved.status == "completed"
    reasons, batches = await writes_of(saved)
    assert len(batches) >= 3 and len(batches) > len(reasons), "the log went to the writer without a checkpoint"
    # Every event exactly once, in order, and the log still replays to the same answer.
    assert sum(count for count, _first, _last in batches) == saved.events
    for (_c, _f, last), (_c2, first, _l) in zip(batches, batches[1:], strict=False):
        assert first == last + 1
    log = await sync_to_async(lambda: selectors.event_log_text(request_id=saved.pk))()
    result = replay_bytes(log.encode())
    assert result.status == "completed"
    assert runner.final_text() == saved.final_text

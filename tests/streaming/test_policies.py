"""The flush and checkpoint policies, with time as plain numbers: no sleeping, no loop."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from responses_app.streaming.policies import CheckpointPolicy, FlushPolicy

# --- flush policy -------------------------------------------------------------------------------


def test_the_first_change_goes_out_at_once() -> None:
    policy = FlushPolicy(0.05)
    assert policy.push(10.0, changed=True)


def test_a_steady_flow_goes_out_at_most_once_per_interval() -> None:
    policy = FlushPolicy(0.05)
    assert policy.push(10.0, changed=True)
    policy.flushed(10.0, sent=True)
    assert not policy.push(10.01, changed=True)
    assert not policy.push(10.02, changed=True)
    assert policy.next_deadline() == pytest.approx(10.05)
    assert not policy.due(10.049) and policy.due(10.05)
    policy.flushed(10.05, sent=True)
    assert policy.next_deadline() is None, "nothing pending after a flush"


def test_text_after_a_quiet_spell_goes_out_at_once() -> None:
    policy = FlushPolicy(0.05)
    policy.push(10.0, changed=True, chars=5)
    policy.flushed(10.0, sent=True)
    assert not policy.push(10.01, changed=True, chars=5), "flowing: it waits for the interval"
    policy.flushed(10.05, sent=True)
    # 20 ms after a flush, but no text for 60 ms: the leading edge again
    assert policy.push(10.07, changed=True, chars=5)


# What a slow flow is batched by: 32 characters, or 100 ms after the oldest pending change.
SLOW = {"max_wait": 0.1, "min_chars": 32}


def test_a_slow_flow_is_carried_out_by_the_chunk_nearest_the_longest_wait() -> None:
    policy = FlushPolicy(0.05, **SLOW)  # type: ignore[arg-type]
    policy.push(9.99, changed=True, chars=5)
    policy.flushed(10.0, sent=True)
    # A chunk of one or two deltas every 50 ms, as at 30 deltas/s.
    assert not policy.push(10.05, changed=True, chars=7), "the oldest pending change"
    assert not policy.push(10.10, changed=True, chars=7), "waited 50 ms: another chunk comes within the wait"
    assert policy.push(10.15, changed=True, chars=7), "waited 100 ms: this chunk carries it, its own text at once"
    policy.flushed(10.15, sent=True)
    for t in (10.20, 10.25, 10.30):
        if policy.push(t, changed=True, chars=16):
            break
    assert t == pytest.approx(10.25), "32 characters pending: worth a patch, the interval has passed"


def test_chunks_an_interval_apart_are_not_held_by_a_late_timer() -> None:
    policy = FlushPolicy(0.05, **SLOW)  # type: ignore[arg-type]
    policy.push(10.0, changed=True, chars=40)
    policy.flushed(10.004, sent=True)  # by a timer that fired 4 ms late
    assert policy.push(10.05, changed=True, chars=40), "46 ms after that flush, but 50 ms after the last chunk"
    policy.flushed(10.05, sent=True)
    assert not policy.push(10.07, changed=True, chars=40), "a chunk 20 ms after the last waits for the interval"


def test_when_no_chunk_comes_the_timer_sends_what_waits() -> None:
    policy = FlushPolicy(0.05, **SLOW)  # type: ignore[arg-type]
    policy.push(9.99, changed=True, chars=5)
    policy.flushed(10.0, sent=True)
    policy.push(10.05, changed=True, chars=7)
    assert policy.next_deadline() == pytest.approx(10.175), "the wait and half an interval"
    assert not policy.due(10.174) and policy.due(10.175)


def test_a_fast_flow_still_goes_out_once_per_interval() -> None:
    policy = FlushPolicy(0.05, **SLOW)  # type: ignore[arg-type]
    policy.push(10.0, changed=True, chars=40)
    policy.flushed(10.0, sent=True)
    assert not policy.push(10.01, changed=True, chars=50), "enough text, but within the interval"
    assert policy.next_deadline() == pytest.approx(10.05)


def test_the_first_text_after_a_boundary_is_not_held_when_no_text_flowed() -> None:
    policy = FlushPolicy(0.05, **SLOW)  # type: ignore[arg-type]
    assert policy.push(10.0, changed=True, boundary=True)  # a block added
    policy.flushed(10.0, sent=True)
    assert policy.push(10.002, changed=True, chars=3), "the answer's first text goes out at once"
    policy.flushed(10.002, sent=True)
    assert not policy.push(10.03, changed=True, chars=3), "then it flows, in batches"
    policy.flushed(10.13, sent=True)
    assert policy.push(10.4, changed=True, chars=3), "text after 370 ms of silence: at once"


def test_the_wait_is_never_shorter_than_the_paced_interval() -> None:
    policy = FlushPolicy(0.05, **SLOW)  # type: ignore[arg-type]
    policy.push(10.0, changed=True, chars=3)
    policy.flushed(10.0, sent=True)
    policy.scale = 4.0  # the pacer: a 200 ms interval
    policy.push(10.01, changed=True, chars=3)
    assert policy.wait == pytest.approx(0.2) and policy.next_deadline() == pytest.approx(10.31)


def test_a_boundary_goes_out_at_once_whatever_the_timing() -> None:
    policy = FlushPolicy(0.05)
    policy.push(10.0, changed=True)
    policy.flushed(10.0, sent=True)
    assert policy.push(10.001, changed=True, boundary=True)


def test_the_pacers_scale_stretches_the_interval() -> None:
    policy = FlushPolicy(0.05)
    policy.push(10.0, changed=True)
    policy.flushed(10.0, sent=True)
    policy.scale = 4.0
    policy.push(10.01, changed=True)
    assert policy.next_deadline() == pytest.approx(10.2)
    assert not policy.push(10.1, changed=True), "100 ms is within a 200 ms interval"


def test_nothing_pending_has_no_deadline() -> None:
    policy = FlushPolicy(0.05)
    assert policy.next_deadline() is None and not policy.due(99.0)
    policy.push(1.0, changed=False)
    assert policy.next_deadline() is None


@pytest.mark.parametrize("bad", [{"interval": -1}, {"interval": 0.05, "max_wait": -1},
                                 {"interval": 0.05, "min_chars": -1}])
def test_a_negative_setting_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        FlushPolicy(**bad)  # type: ignore[arg-type]


# --- checkpoint policy --------------------------------------------------------------------------


def policy(now: float = 0.0, *, interval: float = 0.5, min_events: int = 64, max_interval: float = 2.0
           ) -> CheckpointPolicy:
    return CheckpointPolicy(interval=interval, min_events=min_events, max_interval=max_interval, now=now)


def test_the_first_interval_checkpoint_comes_as_soon_as_the_interval_allows() -> None:
    p = policy()
    p.push(0.1, events=3, changed=True)
    assert not p.due(0.49)
    assert p.due(0.5), "a reload early in an answer shows text"


def test_a_checkpoint_asked_for_comes_once_an_interval_with_something_to_commit() -> None:
    p = policy()
    p.push(0.1, events=3, changed=True)
    p.committed(0.5, interval=True)
    p.push(0.6, events=1, changed=True)
    assert not p.due(0.9) and not p.may_commit(0.9), "within the interval: not even when asked"
    assert not p.due(1.0) and p.may_commit(1.0), "asked: taken before min_events or max_interval"
    p.committed(1.0, interval=True)
    assert not p.may_commit(5.0), "nothing new to commit"


def test_later_checkpoints_wait_for_enough_events() -> None:
    p = policy()
    p.push(0.1, events=3, changed=True)
    p.committed(0.5, interval=True)
    for t in range(1, 60):  # a steady trickle: one event every 10 ms
        p.push(0.5 + t * 0.01, events=1, changed=True)
    assert not p.due(1.1), "59 events after the interval: not yet"
    p.push(1.1, events=5, changed=True)
    assert p.due(1.1)


def test_a_quiet_stream_is_committed_an_interval_after_its_last_change() -> None:
    p = policy()
    p.push(0.1, events=1, changed=True)
    p.committed(0.5, interval=True)
    p.push(0.6, events=1, changed=True)
    assert not p.due(1.05), "the last change was 450 ms ago"
    assert p.due(1.1)
    assert p.next_deadline(0.7, not_before=0.05) == pytest.approx(1.1), "the quiet moment, not the interval's end"
    assert p.next_deadline(1.05, not_before=0.05) == pytest.approx(1.1), "the quiet moment"


def test_the_max_interval_bounds_a_steady_slow_stream() -> None:
    p = policy(min_events=10_000)
    p.push(0.1, events=1, changed=True)
    p.committed(0.5, interval=True)
    t = 0.5
    while t < 2.35:
        t += 0.1
        p.push(t, events=1, changed=True)
        assert not p.due(t), t
    p.push(2.5, events=1, changed=True)
    assert p.due(2.5), "2 s after the last checkpoint"


def test_nothing_new_is_never_due() -> None:
    p = policy()
    assert not p.due(100.0) and p.next_deadline(100.0) is None
    p.push(1.0, events=1)
    p.committed(1.0, interval=False)
    assert not p.dirty and not p.due(100.0)


def test_a_flowing_stream_timer_is_not_sooner_than_a_flush_interval() -> None:
    p = policy()
    p.push(0.1, events=1, changed=True)
    p.committed(0.5, interval=True)
    p.push(1.2, events=1, changed=True)  # past the interval, still flowing
    assert p.next_deadline(1.2, not_before=0.05) == pytest.approx(1.7)
    p.push(1.69, events=1, changed=True)
    assert p.next_deadline(1.7, not_before=0.05) == pytest.approx(2.19)
    assert p.next_deadline(2.6, not_before=0.05) == pytest.approx(2.65), "the max interval has passed"


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        policy(min_events=0)


@given(st.lists(st.tuples(st.floats(0.0, 1.5), st.integers(0, 40), st.booleans(), st.booleans()), max_size=30),
       st.floats(0.0, 3.0))
def test_the_checkpoint_deadline_is_exactly_when_it_falls_due(
        steps: list[tuple[float, int, bool, bool]], wait: float) -> None:
    """Whatever came before: with no further event, `due` is false until the deadline and true
    from it (no timer that wakes to find nothing due), and the deadline is never in the past."""
    p = policy()
    now = 0.0
    for gap, events, changed, commit in steps:
        now += gap
        p.push(now, events=events, changed=changed)
        if commit and p.due(now):
            p.committed(now, interval=True)
    now += wait
    deadline = p.next_deadline(now)
    if deadline is None:
        assert not p.due(now) and not p.due(now + 100.0)
        return
    assert deadline >= now
    if deadline > now:
        assert not p.due(now) and not p.due(now + (deadline - now) * 0.999)
    assert p.due(deadline)

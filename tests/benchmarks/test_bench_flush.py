"""The relay benchmark's stamped deltas: with RELAY_FLUSH_MIN_CHARS scaled by what a stamp adds
(bench/stamps.py), a paced answer goes out in as many patches as the same text unstamped does
with the default; with the default, stamped, in about twice as many (what the CPU section of bench/README.md
measured before stamps were scaled)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import orjson
import pytest

from bench.stamps import FLUSH_MIN_CHARS, STAMP, STAMP_CHARS, stamped_min_chars
from responses_app.streaming.policies import FlushPolicy

FIXTURE = Path(__file__).parents[1] / "fixtures" / "sim" / "sim-long.sse"
PACE = 30  # deltas per second, the CPU section's
TICK = 0.01  # the simulator's shared pacing clock


def delta_texts() -> list[str]:
    return [event["delta"] for line in FIXTURE.read_text().splitlines() if line.startswith("data: ")
            if (event := orjson.loads(line[6:]))["type"] == "response.output_text.delta"]


def deltas_per_patch(chars: list[int], min_chars: int, per_chunk: int) -> float:
    """Patches a paced answer goes out in: the relay's FlushPolicy (its default interval and wait),
    `per_chunk` deltas in each upstream chunk, a deadline served one timer period late."""
    policy = FlushPolicy(0.05, max_wait=0.1, min_chars=min_chars)
    patches = pending = 0

    def flush(now: float) -> None:
        nonlocal patches, pending
        patches += pending > 0
        policy.flushed(now, sent=pending > 0)
        pending = 0

    for start in range(0, len(chars), per_chunk):
        end = min(start + per_chunk, len(chars))
        at = math.ceil((end - 1) / PACE / TICK) * TICK
        deadline = policy.next_deadline()
        if deadline is not None and deadline + TICK <= at:
            flush(deadline + TICK)
        pending += end - start
        if policy.push(at, True, False, sum(chars[start:end])):
            flush(at)
    flush(math.inf)
    return len(chars) / patches


def test_a_stamp_is_as_long_as_the_simulator_makes_it() -> None:
    stamp = f"⟨{time.time():.6f}⟩"
    assert len(stamp) == STAMP_CHARS and STAMP.fullmatch(stamp)


@pytest.mark.parametrize("per_chunk", [1, 2, 3])
def test_scaled_min_chars_sends_stamped_deltas_in_as_many_patches_as_plain_ones(per_chunk: int) -> None:
    texts = delta_texts()
    plain = [len(text) for text in texts]
    stamped = [n + STAMP_CHARS for n in plain]
    min_chars = stamped_min_chars(sum(plain) / len(plain))
    expected = deltas_per_patch(plain, FLUSH_MIN_CHARS, per_chunk)
    assert deltas_per_patch(stamped, min_chars, per_chunk) == pytest.approx(expected, rel=0.05)
    # The default with stamped deltas: about half as many deltas a patch, twice the frames.
    assert deltas_per_patch(stamped, FLUSH_MIN_CHARS, per_chunk) < 0.7 * expected

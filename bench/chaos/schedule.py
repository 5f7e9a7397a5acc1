"""The fault schedule: what happens when, seeded and printed before the run starts.

A cycle holds one rolling restart (every worker, then every web process), one Redis restart and one
PostgreSQL restart; a kill -9 of a worker comes every few minutes between them. A run of M minutes
has max(1, M // CYCLE_MIN) cycles; the first WARMUP of the run and its last minute are left quiet,
so the streams reach steady state before the first fault and the last ones can end. The CI version
(`compressed`) keeps each kind once, packed into two minutes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

KILL9 = "kill -9 worker"
ROLLING = "rolling restart"
ROLLING_WORKER = "rolling restart, a worker"  # the windows a rolling restart is made of
ROLLING_WEB = "rolling restart, a web process"
REDIS = "redis restart"
POSTGRES = "postgresql restart"
DROP = "upstream drop"  # per request, from the simulator (sim.drop_after)
RATE_LIMIT = "upstream 429"  # per request (sim.http_error)
NONE = "none"
KINDS = (KILL9, ROLLING_WORKER, ROLLING_WEB, REDIS, POSTGRES, DROP, RATE_LIMIT, NONE)

CYCLE_MIN = 20.0
KILL9_EVERY_MIN = 3.0
WARMUP = 0.1  # of the run, at least WARMUP_MIN_S
WARMUP_MIN_S = 20.0


@dataclass(frozen=True)
class Fault:
    at_s: float  # from the start of the load
    kind: str
    target: str = ""  # the worker a kill -9 hits

    def __str__(self) -> str:
        return f"{self.at_s:7.1f} s  {self.kind}{f' ({self.target})' if self.target else ''}"


def build(minutes: float, seed: int, workers: int) -> list[Fault]:
    rng = random.Random(seed)
    total = minutes * 60
    start = max(WARMUP_MIN_S, WARMUP * total)
    end = total - 60 if total > 240 else total * 0.85
    if minutes <= 3:
        return compressed(total, rng, workers)
    faults: list[Fault] = []
    cycles = max(1, round(minutes / CYCLE_MIN))
    span = (end - start) / cycles
    for c in range(cycles):
        base = start + c * span
        for share, kind in ((0.2, ROLLING), (0.5, REDIS), (0.8, POSTGRES)):
            faults.append(Fault(round(base + span * (share + rng.uniform(-0.05, 0.05)), 1), kind))
    at = start + rng.uniform(0.3, 1.0) * KILL9_EVERY_MIN * 30
    while at < end:
        # not within 30 s of another fault: each pause is then the doing of one fault
        if all(abs(at - f.at_s) >= 30 for f in faults):
            faults.append(Fault(round(at, 1), KILL9, f"worker-{rng.randrange(workers) + 1}"))
            at += KILL9_EVERY_MIN * 60 * rng.uniform(0.8, 1.2)
        else:
            at += 15
    return sorted(faults, key=lambda f: f.at_s)


ONLY = {"kill9": KILL9, "rolling": ROLLING, "redis": REDIS, "postgres": POSTGRES, "none": NONE}
ONLY_EVERY_S = 45.0
ROLLING_EVERY_S = 120.0  # a rolling restart of four processes takes about 40 s under load: room after it


def only(kind: str, minutes: float, seed: int, workers: int) -> list[Fault]:
    """One kind of fault, every ONLY_EVERY_S (a rolling restart every ROLLING_EVERY_S) from the
    warm-up to the last half minute: many samples of one fault's pauses in a short run. `none`: no
    fault at all, the baseline of pauses and memory."""
    if kind == NONE:
        return []
    rng = random.Random(seed)
    total = minutes * 60
    at, faults = max(WARMUP_MIN_S, WARMUP * total), []
    while at < total - 30:
        faults.append(Fault(round(at, 1), kind, f"worker-{rng.randrange(workers) + 1}" if kind == KILL9 else ""))
        at += ROLLING_EVERY_S if kind == ROLLING else ONLY_EVERY_S
    return faults


def compressed(total: float, rng: random.Random, workers: int) -> list[Fault]:
    """Every kind once in a short run: kill -9 first (its takeover is the slowest), then the rest."""
    step = (total * 0.75 - WARMUP_MIN_S) / 4
    return [Fault(round(WARMUP_MIN_S, 1), KILL9, f"worker-{rng.randrange(workers) + 1}"),
            Fault(round(WARMUP_MIN_S + step, 1), ROLLING),
            Fault(round(WARMUP_MIN_S + 2 * step, 1), REDIS),
            Fault(round(WARMUP_MIN_S + 3 * step, 1), POSTGRES)]

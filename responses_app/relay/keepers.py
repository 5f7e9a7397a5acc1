"""The process's keepers of its runners: one lease keeper, one pacer, whatever the number of streams.

May import: Django, the services; never a runner (runners are known through `hub.Runner`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from typing import Any

from ..ops import metrics
from ..services import leases_renew
from . import malloc
from .protocols import Runner

logger = logging.getLogger(__name__)

LEASE_POLL_S = 2.0  # how often the lease keeper looks for a Stop pressed in another process
LEASE_RENEW_S = 4.0  # leases last services.LEASE_SECONDS (12 s): renewed well before they run out
HEARTBEAT_S = 10.0  # how often each runner tells its viewers its status and latest revision


class Pacer:
    """Stretches every runner's flush interval while the event loop falls behind.

    Each patch costs the same to send whatever it holds, so when the process is short of CPU,
    fewer and larger patches keep every stream flowing where one patch per 50 ms would fall
    further behind. The loop's lag is sampled every 100 ms: over 20 ms the scale grows by half,
    up to 4x (200 ms at the default interval); under 5 ms it shrinks back towards 1."""

    PERIOD = 0.1
    MAX_SCALE = 4.0

    def __init__(self, leases: LeaseKeeper) -> None:
        self.leases = leases  # the pacer runs while the process has runners
        self.scale = 1.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="relay-pacer", context=contextvars.Context())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self.leases.runners:
            started = loop.time()
            await asyncio.sleep(self.PERIOD)
            lag = loop.time() - started - self.PERIOD
            metrics.EVENT_LOOP_LAG.set(max(lag, 0.0))
            if lag > 0.02:
                self.scale = min(self.scale * 1.5, self.MAX_SCALE)
            elif lag < 0.005:
                self.scale = max(1.0, self.scale / 1.25)
        self.scale = 1.0
        metrics.EVENT_LOOP_LAG.set(0)  # sampled while streams run: none run here now


class LeaseKeeper:
    """Keeps the leases of every runner in the process, in one statement per round.

    Each runner renewing its own lease and polling for a Stop spent a visible share of the
    process's CPU in ORM calls holding the GIL (bench/README.md, relay). Here a round costs the
    same for one runner or a thousand: one read (Stop pressed elsewhere?) every LEASE_POLL_S, one
    UPDATE every LEASE_RENEW_S. It also has every runner send its viewers a heartbeat every
    HEARTBEAT_S (see `Runner.heartbeat`), and gives the allocator's free pages back every
    `malloc.TRIM_S` and when the last runner ended."""

    def __init__(self, run_db: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        self._db = run_db
        self.runners: set[Runner] = set()
        self._task: asyncio.Task[None] | None = None
        self.trims = 0
        self.trim_seconds = 0.0  # spent in malloc_trim, on the loop (the benchmark reads it)

    def add(self, runner: Runner) -> None:
        if runner not in self.runners:
            metrics.STREAMS_IN_FLIGHT.inc()
        self.runners.add(runner)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="relay-lease-keeper", context=contextvars.Context())

    def discard(self, runner: Runner) -> None:
        if runner in self.runners:
            metrics.STREAMS_IN_FLIGHT.dec()
        self.runners.discard(runner)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        renewed = beat = trimmed = loop.time()
        while self.runners:
            await asyncio.sleep(LEASE_POLL_S)
            now = loop.time()
            if now - trimmed >= malloc.TRIM_S:
                trimmed = now
                self._trim()
            runners = list(self.runners)
            for runner in runners:
                runner.check_idle(now)
            if now - beat >= HEARTBEAT_S:
                beat = now
                for runner in runners:
                    runner.heartbeat()
            renew = now - renewed >= LEASE_RENEW_S - LEASE_POLL_S / 2
            try:
                news = await self._db(leases_renew)(
                    leases=[(runner.uuid, runner.token) for runner in runners], renew=renew)
            except Exception:  # the next round tries again; a lease lasts three renewals
                logger.warning("lease round for %d runners failed", len(runners), exc_info=True)
                continue
            if renew:
                renewed = now
                for runner in runners:
                    runner.count_write()
            for runner in runners:
                happened = news.get(runner.uuid)
                if happened == "lost":
                    runner.abandon()  # another runner took the request over: stop, write nothing
                elif happened == "cancelled" and not runner.cancel_requested.is_set():
                    runner.cancel()  # Stop pressed in a process that does not run this request
        self._trim()  # the last runner ended: what they freed goes back

    def _trim(self) -> None:
        if malloc.AVAILABLE:
            self.trims += 1
            self.trim_seconds += malloc.trim()

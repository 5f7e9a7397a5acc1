"""The wait between attempts to get a lost connection back (the channel layer, PostgreSQL's
LISTEN): short at first, as a restart usually is, then capped, and short again after a success."""

from __future__ import annotations

import asyncio
import logging

DELAYS_S = (0.2, 0.5, 1.0, 2.0, 5.0)


class Backoff:
    __slots__ = ("delays", "failures")

    def __init__(self, delays: tuple[float, ...] = DELAYS_S) -> None:
        self.delays = delays
        self.failures = 0

    def next_delay(self) -> float:
        delay = self.delays[min(self.failures, len(self.delays) - 1)]
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0

    async def wait(self, logger: logging.Logger, lost: str) -> None:
        """Say what was lost (with the exception being handled) and wait before the next attempt."""
        delay = self.next_delay()
        logger.warning("%s; again in %.1fs", lost, delay, exc_info=True)
        await asyncio.sleep(delay)

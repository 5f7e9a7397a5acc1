"""The pacer stretches flush intervals while the event loop is behind, and relaxes after."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from responses_app.relay.keepers import Pacer


async def test_a_lagging_loop_stretches_the_interval_and_a_calm_one_restores_it(monkeypatch: Any) -> None:
    monkeypatch.setattr(Pacer, "PERIOD", 0.02)
    leases: Any = SimpleNamespace(runners={"a runner"})
    pacer = Pacer(leases)
    pacer.start()
    for _ in range(20):  # the loop blocked for 60 ms at a time, with only a moment between: far behind
        await asyncio.sleep(0)
        time.sleep(0.06)
    assert 3 <= pacer.scale <= Pacer.MAX_SCALE
    async with asyncio.timeout(10):
        while pacer.scale > 1.0:  # calm again
            await asyncio.sleep(0.02)
    leases.runners.clear()
    async with asyncio.timeout(5):
        while not pacer._task.done():  # type: ignore[union-attr]
            await asyncio.sleep(0.02)

"""A stopping process lets its streams go HANDOFF_PER_S a second (at most HANDOFF_SPREAD_S for all),
not all at once: the process that takes them over starts each as it comes (a worker's 50 streams
resumed at once by the other took up to 3.5 s each in the chaos run), while those not let go yet
go on flowing where they are."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from responses_app.relay import worker


class Runner:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.let_go_at: float | None = None

    def hand_off(self, *, now: bool = False) -> bool:
        self.let_go_at = self.loop.time()
        return True


@pytest.mark.parametrize("streams", [10, 80])
async def test_streams_are_let_go_a_few_at_a_time(monkeypatch: pytest.MonkeyPatch, streams: int) -> None:
    loop = asyncio.get_running_loop()
    runners = {f"r{i}": Runner(loop) for i in range(streams)}
    hub: Any = SimpleNamespace(runners=runners, loop=loop, tasks=set(), fanout=None)
    monkeypatch.setattr(worker, "get_hub", lambda: hub)
    started = loop.time()
    assert await worker.hand_off() == streams
    times = [r.let_go_at for r in runners.values()]
    assert all(t is not None for t in times)
    rate = max(worker.HANDOFF_PER_S, streams / worker.HANDOFF_SPREAD_S)
    span = max(times) - started  # type: ignore[type-var, operator]
    assert (streams - 1) / rate * 0.9 <= span <= worker.HANDOFF_SPREAD_S + 0.3, span
    first_second = sum(t - started < 1.0 for t in times)  # type: ignore[operator]
    assert first_second <= rate + 1, "not all at once"

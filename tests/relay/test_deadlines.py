"""The process's one timer for every delivery's deadline (relay/deadlines.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from responses_app.relay.deadlines import Deadlines


class Owner:
    def __init__(self, loop: asyncio.AbstractEventLoop, then: Callable[[Owner], None] | None = None) -> None:
        self.loop = loop
        self.fired: list[float] = []
        self.then = then

    def on_deadline(self) -> None:
        self.fired.append(self.loop.time())
        if self.then is not None:
            self.then(self)


async def _until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_a_deadline_fires_once_and_at_most_a_period_late() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop, period=0.05)
    owner = Owner(loop)
    at = loop.time() + 0.1
    deadlines.set(owner, at)
    await _until(lambda: bool(owner.fired))
    assert at <= owner.fired[0] <= at + 0.05 + 0.05  # the period, and a loaded machine's slack
    await asyncio.sleep(0.15)
    assert len(owner.fired) == 1 and len(deadlines) == 0


async def test_a_cleared_or_moved_deadline_does_not_wake_its_owner_early() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop, period=0.01)
    cleared, moved = Owner(loop), Owner(loop)
    now = loop.time()
    deadlines.set(cleared, now + 0.05)
    deadlines.set(moved, now + 0.05)
    deadlines.clear(cleared)
    deadlines.set(moved, now + 0.3)  # the flow overtook it: later now
    await asyncio.sleep(0.15)
    assert cleared.fired == [] and moved.fired == []
    await _until(lambda: bool(moved.fired))
    assert moved.fired[0] >= now + 0.3 and cleared.fired == []


async def test_an_owner_re_arming_later_does_not_delay_the_others() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop, period=0.01)
    now = loop.time()
    late = Owner(loop, then=lambda o: deadlines.set(o, now + 10) if len(o.fired) == 1 else None)
    soon = Owner(loop)
    deadlines.set(late, now + 0.02)
    deadlines.set(soon, now + 0.021)  # not ripe at late's wakeup, if that comes first
    await _until(lambda: bool(soon.fired))
    # Delayed by late's re-arming, it would fire 10 s on; a loaded CI lane's loop is ~0.1 s late.
    assert soon.fired[0] <= now + 0.021 + 0.5


async def test_many_deadlines_share_a_bounded_number_of_wakeups() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop, period=0.02)
    now = loop.time()
    owners = [Owner(loop) for _ in range(200)]
    for i, owner in enumerate(owners):
        deadlines.set(owner, now + 0.05 + i * 0.001)  # one every millisecond for 200 ms
    await _until(lambda: all(o.fired for o in owners))
    assert all(len(o.fired) == 1 for o in owners)
    assert deadlines.wakeups <= 0.2 / 0.02 + 3, deadlines.wakeups  # one timer per period, not one per owner

"""Every delivery's next deadline in the process, on one timer.

A delivery (delivery.py) has a deadline whenever it holds something a policy will want done
without another chunk: a patch (the flow paused), a checkpoint (the interval or the quiet moment),
a safety window. It moves with almost every chunk, and almost always the next chunk does the work
first. With one loop timer per delivery, re-arming it and waking up to find nothing due were a
large share of the relay's own cost over the core's (bench/README.md, relay).

Here a deadline is a number in a dict (`set` is a dict store), and one timer serves them all:
armed for the earliest deadline, but never sooner than `period` after the last wakeup, so a
deadline fires at most `period` late. A delivery that no longer has a deadline drops out
(`clear`), so a deadline that the flow overtook never wakes anyone.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

PERIOD_S = 0.01  # the most a deadline fires late; at most this many wakeups a second, whatever the streams


class Owner(Protocol):
    def on_deadline(self) -> None: ...


class Deadlines:
    __slots__ = ("_loop", "period", "_due", "_timer", "_timer_at", "_next_allowed", "wakeups")

    def __init__(self, loop: asyncio.AbstractEventLoop, period: float = PERIOD_S) -> None:
        self._loop = loop
        self.period = period
        self._due: dict[Owner, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._next_allowed = 0.0  # a wakeup's time + period: the timer never fires sooner
        self.wakeups = 0  # the timer's, since the start

    def __len__(self) -> int:
        return len(self._due)

    def set(self, owner: Owner, at: float) -> None:
        """`owner.on_deadline()` at `at` (or up to `period` later), unless set again or cleared first."""
        self._due[owner] = at
        timer = self._timer
        if timer is not None:
            if at >= self._timer_at - self.period:
                return  # the armed timer serves it (late by less than a period)
            timer.cancel()
        when = at if at > self._next_allowed else self._next_allowed
        self._timer_at = when
        self._timer = self._loop.call_at(when, self._fire)

    def clear(self, owner: Owner) -> None:
        self._due.pop(owner, None)

    def _fire(self) -> None:
        self._timer = None
        self.wakeups += 1
        now = self._loop.time()
        self._next_allowed = now + self.period
        due = self._due
        ripe = [owner for owner, at in due.items() if at <= now]
        for owner in ripe:
            del due[owner]
        if due:  # armed for the rest first: an owner setting a later deadline below cannot delay them
            earliest = min(due.values())
            when = earliest if earliest > self._next_allowed else self._next_allowed
            self._timer_at = when
            self._timer = self._loop.call_at(when, self._fire)
        for owner in ripe:
            owner.on_deadline()  # may set a new deadline (arming the timer sooner)

"""A one-way flag for a stream runner: `asyncio.Event`'s `set`/`is_set`/`wait`, smaller.

An `asyncio.Event` keeps a `collections.deque` of waiters from the start, and its own dict; a
runner has two and nobody waits on most of them. This keeps a bool and, only once something
waits, a list of futures (bench/README.md, storage: memory per in-flight stream).
It is never cleared: a runner's cancel and end happen once.
"""

from __future__ import annotations

import asyncio


class Flag:
    __slots__ = ("_value", "_waiters")

    def __init__(self) -> None:
        self._value = False
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        if self._value:
            return
        self._value = True
        waiters, self._waiters = self._waiters, None
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)

    async def wait(self) -> bool:
        if self._value:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(fut)
        try:
            await fut
            return True
        finally:
            if self._waiters is not None and fut in self._waiters:
                self._waiters.remove(fut)

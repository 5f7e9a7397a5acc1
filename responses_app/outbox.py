"""A viewer's outbox: the frames waiting for its socket, bounded, with one reader (the writer).

Not `asyncio.Queue`: a queue cannot say that its reader is parked on it with nothing queued,
which is when a frame can go to the socket at once, in the caller, without waking a task for it
(`send_now`, see `RequestConsumer.offer`). `python -m bench outbox` (bench/results/outbox.md):
per frame, over the producer's own loop turn, 2.24 µs through a queue and a woken writer, 1.90
through this outbox and a woken writer, 0.92 sent in offer. The frame also leaves in the callback
that made it instead of a later turn of the loop.
"""

from __future__ import annotations

import asyncio
import types
from collections import deque
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any


class Outbox:
    __slots__ = ("maxsize", "_items", "_waiter")

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._items: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def __len__(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    @property
    def parked(self) -> bool:
        """The reader waits in `get` with nothing queued: it is sending nothing either."""
        return self._waiter is not None and not self._items

    def put_nowait(self, item: Any) -> None:
        """Queue an item; `asyncio.QueueFull` once `maxsize` are waiting."""
        if len(self._items) >= self.maxsize:
            raise asyncio.QueueFull
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def get_nowait(self) -> Any:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.popleft()

    def clear(self) -> None:
        self._items.clear()

    async def get(self) -> Any:
        items = self._items
        while not items:
            self._waiter = waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        return items.popleft()


def send_now(send: Any, message: dict[str, Any]) -> Awaitable[None] | None:
    """Run an ASGI `send(message)` in the caller, as far as it goes without waiting.

    None: it completed (an ASGI server's websocket send waits only while the socket's writes are
    paused). Otherwise the suspended send, for the caller's writer to finish with `finish`, before
    anything sent after it. An error of the send is raised here, as the writer's own would be."""
    coro = send(message)
    try:
        pending = coro.send(None)
    except StopIteration:
        return None
    return _finish(coro, pending)


@types.coroutine
def _finish(coro: Coroutine[Any, Any, None], pending: Any) -> Generator[Any, None, None]:
    """Await what a suspended coroutine waits for, and resume it until it returns (or raises)."""
    while True:
        try:
            yield pending
        except BaseException as exc:  # the writer was cancelled or its wait failed: the send decides
            try:
                pending = coro.throw(exc)
            except StopIteration:
                return
            continue
        try:
            pending = coro.send(None)
        except StopIteration:
            return

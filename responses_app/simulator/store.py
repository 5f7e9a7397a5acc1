"""In-memory responses: the event log of each, its Response object and generation task.

Readers (the POST stream and any GET resume) read the log by position and wait on a future that the
generation task resolves when it appends, so resuming and background mode need no special path.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right
from collections import OrderedDict
from typing import Any

from .faults import Faults

TERMINAL = frozenset({"completed", "failed", "incomplete", "cancelled"})


class SimResponse:
    __slots__ = (
        "id",
        "obj",
        "background",
        "faults",
        "created",
        "entries",
        "seqs",
        "base",
        "finished",
        "task",
        "_waiters",
        "trim",
        "calls",
        "prev_id",
        "__weakref__",
    )

    def __init__(
        self,
        response_id: str,
        obj: dict[str, Any],
        *,
        background: bool,
        faults: Faults,
        prev_id: str | None,
    ) -> None:
        self.id = response_id
        self.obj = obj
        self.background = background
        self.faults = faults
        self.created = time.monotonic()
        # Serialised SSE blocks and the sequence number each carries (a malformed block gets the one
        # before it, so a resume past it skips it).
        self.entries: list[bytes] = []
        self.seqs: list[int] = []
        self.base = 0  # entries dropped from the front (non-background logs are trimmed as read)
        self.finished = False
        self.task: asyncio.Task[None] | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self.trim = not background
        self.calls: dict[str, tuple[str, str]] = {}  # call_id -> (name, arguments)
        self.prev_id = prev_id

    @property
    def status(self) -> str:
        return str(self.obj["status"])

    def append(self, entries: list[bytes], seqs: list[int]) -> None:
        self.entries.extend(entries)
        self.seqs.extend(seqs)
        self._wake()

    def finish(self) -> None:
        self.finished = True
        self._wake()

    def _wake(self) -> None:
        waiters = self._waiters
        if waiters:
            self._waiters = []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def waiter(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def position_after(self, sequence_number: int) -> int:
        return self.base + bisect_right(self.seqs, sequence_number)

    def read(self, pos: int) -> tuple[list[bytes], list[int]]:
        start = pos - self.base
        return self.entries[start:], self.seqs[start:]

    def consumed(self, pos: int) -> None:
        if self.trim and pos > self.base:
            cut = pos - self.base
            del self.entries[:cut]
            del self.seqs[:cut]
            self.base = pos

    def start(self, task: asyncio.Task[None]) -> None:
        self.task = task
        task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[None]) -> None:
        # A task cancelled before its first step never ran its own cleanup.
        if not self.finished:
            if self.obj["status"] not in TERMINAL:
                self.obj["status"] = "cancelled"
            self.finish()

    def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()


class Store:
    """Bounded: finished responses beyond `capacity` or older than `max_age_s` are evicted."""

    def __init__(self, capacity: int = 5000, max_age_s: float = 1800.0) -> None:
        self.capacity = capacity
        self.max_age_s = max_age_s
        self._items: OrderedDict[str, SimResponse] = OrderedDict()
        self._adds = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, response_id: str) -> SimResponse | None:
        return self._items.get(response_id)

    def add(self, resp: SimResponse) -> None:
        old = self._items.pop(resp.id, None)
        if old is not None:
            old.cancel()
        self._items[resp.id] = resp
        self._adds += 1
        if len(self._items) > self.capacity or self._adds % 256 == 0:
            self._evict()

    def discard(self, response_id: str) -> None:
        self._items.pop(response_id, None)

    def _evict(self) -> None:
        now = time.monotonic()
        target = int(self.capacity * 0.9)
        for key, resp in list(self._items.items()):
            if not resp.finished:
                continue
            if len(self._items) > target or now - resp.created > self.max_age_s:
                del self._items[key]

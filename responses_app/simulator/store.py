"""In-memory responses: the event log of each, its Response object and generation task.

Readers (the POST stream and any GET resume) read the log by position and wait on a future that the
generation task resolves when it appends, so resuming and background mode need no special path.

A finished response nobody is reading is packed: its Response object and what is left of its log
are compressed (a foreground log, which nobody can read again, is dropped), and the store keeps
packed responses within a byte budget, oldest evicted first. Reading a packed response unpacks
it for that read only, so retrieve, resume, cancel and `previous_response_id` work as before.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson

from .faults import Faults

TERMINAL = frozenset({"completed", "failed", "incomplete", "cancelled"})
# What a packed response costs beside its compressed bytes (the object, its faults, its calls),
# counted in the store's budget so that the budget bounds the memory, not only the payloads.
PACKED_OVERHEAD = 1024
_LEVEL = 1  # zlib: about ten to one on event logs, a few ms for the longest


class SimResponse:
    __slots__ = (
        "id",
        "_obj",
        "_packed_obj",
        "_packed_log",
        "_packed_count",
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
        "readers",
        "size",
        "on_packed",
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
        self._obj: dict[str, Any] | None = obj
        self._packed_obj = b""
        self._packed_log: tuple[bytes, bytes] | None = None  # (entries, lengths then seqs)
        self._packed_count = 0
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
        self.readers = 0  # streams reading the log now: it is packed once none is left
        self.size = 0  # bytes it holds once packed, overhead included
        self.on_packed: Callable[[SimResponse], None] | None = None

    @property
    def obj(self) -> dict[str, Any]:
        """The Response object (a fresh copy once packed: a finished response no longer changes)."""
        if self._obj is not None:
            return self._obj
        return orjson.loads(zlib.decompress(self._packed_obj))  # type: ignore[no-any-return]

    @property
    def packed(self) -> bool:
        return self._obj is None

    @property
    def status(self) -> str:
        return str(self.obj["status"])

    @property
    def end(self) -> int:
        """The position after the last entry of the log."""
        return self.base + (self._packed_count if self._obj is None else len(self.entries))

    def append(self, entries: list[bytes], seqs: list[int]) -> None:
        self.entries.extend(entries)
        self.seqs.extend(seqs)
        self._wake()

    def finish(self) -> None:
        self.finished = True
        self._wake()
        if not self.readers:
            self.pack()

    def attach(self) -> None:
        self.readers += 1

    def detach(self) -> None:
        self.readers -= 1
        if not self.readers and self.finished:
            self.pack()

    def pack(self) -> None:
        """Compress a finished response (idempotent); tells the store its size."""
        if self._obj is None:
            return
        self._packed_obj = zlib.compress(orjson.dumps(self._obj), _LEVEL)
        self._obj = None
        size = PACKED_OVERHEAD + len(self._packed_obj)
        if self.entries and not self.trim:
            index = array("i", [len(e) for e in self.entries])
            index.extend(self.seqs)
            self._packed_log = (
                zlib.compress(b"".join(self.entries), _LEVEL),
                zlib.compress(index.tobytes(), _LEVEL),
            )
            self._packed_count = len(self.entries)
            size += len(self._packed_log[0]) + len(self._packed_log[1])
        else:
            self.base += len(self.entries)  # nobody can read a foreground log again
        self.entries = []
        self.seqs = []
        self.size = size
        if self.on_packed is not None:
            self.on_packed(self)

    def _unpack_log(self) -> tuple[list[bytes], list[int]]:
        if self._packed_log is None:
            return [], []
        data = zlib.decompress(self._packed_log[0])
        index = array("i")
        index.frombytes(zlib.decompress(self._packed_log[1]))
        count = self._packed_count
        entries = []
        at = 0
        for length in index[:count]:
            entries.append(data[at : at + length])
            at += length
        return entries, index[count:].tolist()

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
        seqs = self.seqs if self._obj is not None else self._unpack_log()[1]
        return self.base + bisect_right(seqs, sequence_number)

    def read(self, pos: int) -> tuple[list[bytes], list[int]]:
        start = pos - self.base
        if self._obj is None:
            if start >= self._packed_count:
                return [], []
            entries, seqs = self._unpack_log()
            return entries[start:], seqs[start:]
        return self.entries[start:], self.seqs[start:]

    def consumed(self, pos: int) -> None:
        if self.trim and pos > self.base and self._obj is not None:
            cut = pos - self.base
            del self.entries[:cut]
            del self.seqs[:cut]
            self.base = pos

    def start(self, task: asyncio.Task[None]) -> None:
        self.task = task
        task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[None]) -> None:
        self.task = None  # a finished task keeps nothing worth holding
        # A task cancelled before its first step never ran its own cleanup.
        if not self.finished:
            obj = self.obj
            if obj["status"] not in TERMINAL:
                obj["status"] = "cancelled"
            self.finish()

    def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()


class Store:
    """Bounded: finished responses beyond `capacity` or older than `max_age_s` are evicted, and
    packed ones, oldest first, beyond `max_bytes` (the newest is always kept)."""

    def __init__(
        self, capacity: int = 5000, max_age_s: float = 1800.0, max_bytes: int = 24 * 1024 * 1024
    ) -> None:
        self.capacity = capacity
        self.max_age_s = max_age_s
        self.max_bytes = max_bytes
        self.bytes = 0  # what the packed responses hold, overhead included
        self._items: OrderedDict[str, SimResponse] = OrderedDict()
        self._packed: OrderedDict[str, int] = OrderedDict()  # id -> size, in packing order
        self._adds = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, response_id: str) -> SimResponse | None:
        return self._items.get(response_id)

    def add(self, resp: SimResponse) -> None:
        old = self._remove(resp.id)
        if old is not None:
            old.cancel()
        self._items[resp.id] = resp
        resp.on_packed = self._on_packed
        self._adds += 1
        if len(self._items) > self.capacity or self._adds % 256 == 0:
            self._evict()

    def discard(self, response_id: str) -> None:
        self._remove(response_id)

    def _remove(self, response_id: str) -> SimResponse | None:
        resp = self._items.pop(response_id, None)
        size = self._packed.pop(response_id, None)
        if size is not None:
            self.bytes -= size
        return resp

    def _on_packed(self, resp: SimResponse) -> None:
        if self._items.get(resp.id) is not resp or resp.id in self._packed:
            return
        self._packed[resp.id] = resp.size
        self.bytes += resp.size
        while self.bytes > self.max_bytes and len(self._packed) > 1:
            self._remove(next(iter(self._packed)))

    def _evict(self) -> None:
        now = time.monotonic()
        target = int(self.capacity * 0.9)
        for key, resp in list(self._items.items()):
            if not resp.finished:
                continue
            if len(self._items) > target or now - resp.created > self.max_age_s:
                self._remove(key)

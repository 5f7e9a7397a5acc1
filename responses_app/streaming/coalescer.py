"""Coalesce a view's ops into patches sent at most every `interval` seconds.

The relay drains `ViewModel.take_ops()` after every chunk and `push`es the ops here; it sends
`flush()`'s patch when `push` says so (the ops held a boundary: anything but an `append`), when
`due(now)` (the interval has passed since the first op still pending), or on its own timer set
for `next_deadline()`.

A patch is `{"base": r0, "revision": r1, "ops": [...]}`, the ops pushed since the last flush
with *adjacent* `append` ops to the same block merged into one; nothing is reordered, so a
client applying it with `view.apply_patch` reaches exactly the view at r1 (tests check this).
Merging keeps text as a list of pieces joined once at flush, so a patch costs O(its text).

Memory is bounded: once more than `max_pending_ops` ops have been pushed since the last flush,
`push` and `due` report the coalescer urgent, so the caller flushes now.

Time is an argument, never read from a clock (like zulip's event queue passes `now`): the
caller's loop time in production, plain numbers in tests. Pure: no Django, no I/O.
"""

from __future__ import annotations

from typing import Any

from .view import Op


class Coalescer:
    __slots__ = (
        "interval", "max_pending_ops", "_base", "_revision", "_ops", "_tail_block",
        "_tail_text", "_first_at", "_pushed",
    )

    def __init__(self, interval: float, max_pending_ops: int = 2000) -> None:
        if interval < 0:
            raise ValueError(f"interval must not be negative, got {interval}")
        if max_pending_ops < 1:
            raise ValueError(f"max_pending_ops must be positive, got {max_pending_ops}")
        self.interval = interval
        self.max_pending_ops = max_pending_ops
        self._base: int | None = None  # the revision the pending patch applies on
        self._revision: int | None = None  # the revision after the pending ops
        self._ops: list[Op] = []  # finished ops of the pending patch
        self._tail_block: str | None = None  # the trailing append still being merged ...
        self._tail_text: list[str] = []  # ... and its text pieces
        self._first_at: float | None = None  # when the first pending op was pushed
        self._pushed = 0  # ops pushed since the last flush, before merging

    # --- input ------------------------------------------------------------------------------

    def push(self, base: int, ops: list[Op], revision: int, now: float) -> bool:
        """Take ops as `take_ops()` returned them (`base`), with the view's `revision` after them.

        Returns True when the caller should flush now: the ops held something other than an
        `append` (a boundary: a block added, a state or meta change), or too much is pending.
        """
        if not ops:
            if revision != base:
                raise ValueError(f"no ops, yet revision {base} -> {revision}")
            return False
        if self._revision is not None and base != self._revision:
            raise ValueError(f"ops on revision {base} do not continue the pending {self._revision}")
        if self._base is None:
            self._base = base
            self._first_at = now
        self._revision = revision
        self._pushed += len(ops)
        boundary = False
        tail_block = self._tail_block
        tail_text = self._tail_text
        for op in ops:
            if op[0] == "append":
                if op[1] == tail_block:
                    tail_text.append(op[2])
                    continue
                if tail_block is not None:
                    self._ops.append(["append", tail_block, "".join(tail_text)])
                tail_block = op[1]
                tail_text = [op[2]]
            else:
                if tail_block is not None:
                    self._ops.append(["append", tail_block, "".join(tail_text)])
                    tail_block = None
                    tail_text = []
                self._ops.append(op)
                boundary = True
        self._tail_block = tail_block
        self._tail_text = tail_text
        return boundary or self._pushed > self.max_pending_ops

    # --- timing -----------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        return self._base is not None

    def due(self, now: float) -> bool:
        """Something is pending and it is time to send it (or too much is pending)."""
        first = self._first_at
        if first is None:
            return False
        return now - first >= self.interval or self._pushed > self.max_pending_ops

    def next_deadline(self) -> float | None:
        """When the pending ops fall due; None with nothing pending."""
        first = self._first_at
        return None if first is None else first + self.interval

    # --- output -----------------------------------------------------------------------------

    def flush(self) -> dict[str, Any] | None:
        """The pending ops as one patch, or None; the coalescer then starts empty."""
        if self._base is None:
            return None
        ops = self._ops
        if self._tail_block is not None:
            ops.append(["append", self._tail_block, "".join(self._tail_text)])
        patch = {"base": self._base, "revision": self._revision, "ops": ops}
        self._base = self._revision = self._tail_block = self._first_at = None
        self._ops = []
        self._tail_text = []
        self._pushed = 0
        return patch

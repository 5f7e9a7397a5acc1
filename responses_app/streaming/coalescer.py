"""Coalesce a view's ops into patches: what goes into a patch, never when (policies.py decides).

The relay pushes the ops of every change here and sends `flush()`'s patch when `push` says so
(the ops held a boundary: anything but an `append`, or too much is pending) or when its
FlushPolicy says the interval is over.

A patch is `{"base": r0, "revision": r1, "ops": [...]}`, the ops pushed since the last flush
with *adjacent* `append` ops to the same block merged into one; nothing is reordered, so a
client applying it with `view.apply_patch` reaches exactly the view at r1 (tests check this).
Merging keeps text as a list of pieces joined once at flush, so a patch costs O(its text).

Memory is bounded: once more than `max_pending_ops` ops have been pushed since the last flush,
`push` reports the coalescer urgent, so the caller flushes now. Pure: no Django, no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

from .view import Op


class Coalescer:
    __slots__ = ("max_pending_ops", "_base", "_revision", "_ops", "_tail_block", "_tail_text", "_pushed",
                 "pending_chars")

    def __init__(self, max_pending_ops: int = 2000) -> None:
        if max_pending_ops < 1:
            raise ValueError(f"max_pending_ops must be positive, got {max_pending_ops}")
        self.max_pending_ops = max_pending_ops
        self._base: int | None = None  # the revision the pending patch applies on
        self._revision: int | None = None  # the revision after the pending ops
        self._ops: list[Op] = []  # finished ops of the pending patch
        self._tail_block: str | None = None  # the trailing append still being merged ...
        self._tail_text: list[str] = []  # ... and its text pieces
        self._pushed = 0  # ops pushed since the last flush, before merging
        # Characters of text appended since the last flush (what a FlushPolicy weighs): an
        # attribute, read twice a chunk.
        self.pending_chars = 0

    # --- input ------------------------------------------------------------------------------

    def push(self, base: int, ops: list[Op], revision: int) -> bool:
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
        self._revision = revision
        self._pushed += len(ops)
        boundary = False
        tail_block = self._tail_block
        tail_text = self._tail_text
        chars = 0
        for op in ops:
            if op[0] == "append":
                chars += len(op[2])
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
        self.pending_chars += chars
        return boundary or self._pushed > self.max_pending_ops

    @property
    def pending(self) -> bool:
        return self._base is not None

    # --- output -----------------------------------------------------------------------------

    def flush(self) -> dict[str, Any] | None:
        """The pending ops as one patch, or None; the coalescer then starts empty."""
        if self._base is None:
            return None
        ops = self._ops
        if self._tail_block is not None:
            ops.append(["append", self._tail_block, "".join(self._tail_text)])
        patch = {"base": self._base, "revision": self._revision, "ops": ops}
        self._base = self._revision = self._tail_block = None
        self._ops = []
        self._tail_text = []
        self._pushed = self.pending_chars = 0
        return patch

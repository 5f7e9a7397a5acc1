"""What a checkpoint holds: the one place that decides base, ops and snapshot.

The relay hands `published(patch)` every patch it sent (already coalesced for the wire) and calls
`capture(transcript, reason)` at each checkpoint; when is the CheckpointPolicy's concern, the
database's is the writer's. This decides the row:

- a runner's first row holds the whole view (a *base*); each later one holds only the ops
  published since the previous row's revision, so the rows of an answer hold its text once, not
  once per checkpoint; every `chain_max`-th row is a base again, so a reader applies a bounded
  number of rows' ops; ops that do not continue what was captured make the next row a base;
- the Response snapshot is stored once per response: with the first capture after it ended and
  its text was judged (progressive safety shows text before its verdict, a flag may still take it
  back), or with the request's terminal capture;
- a row stays open until the writer's round takes it (`seal`): a capture meanwhile goes into it
  (its ops extended, its revision moved on, a snapshot it holds kept unless a newer one comes), so
  a round writes one row per request, never a hole in the chain;
- `seal()` serialises the row once, with adjacent appends to one block merged (across patches:
  within one, the patch stream merged them already); a sealed row never changes.

Captured right after a flush, every stored revision is a patch boundary: a viewer starting from a
checkpoint chains the patches that follow it. Pure: no Django, no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

import orjson

from .transcript import Transcript
from .view import Op

# Ops rows after a base before the next base, and so the most a reader applies: spaced by the
# checkpoint interval, a chain covers minutes of streaming, so even a long answer has few bases.
CHAIN_MAX = 128


class CheckpointRow:
    """One checkpoint row: open (the builder may still extend it) until sealed."""

    __slots__ = ("revision", "sequence_number", "reason", "base_revision", "view", "ops", "snapshot", "_sealed")

    def __init__(self, revision: int, sequence_number: int | None, reason: str, *, view: bytes | None = None,
                 base_revision: int | None = None, ops: list[Op] | None = None, snapshot: bytes | None = None) -> None:
        self.revision = revision
        self.sequence_number = sequence_number
        self.reason = reason  # boundary | interval | terminal
        self.base_revision = base_revision  # None: `view` is whole
        self.view = view  # a base: the view, serialised
        self.ops = ops  # otherwise: the ops from `base_revision` to `revision`, as published
        self.snapshot = snapshot  # the Response, serialised, once per response
        self._sealed: dict[str, Any] | None = None

    @property
    def sealed(self) -> bool:
        return self._sealed is not None

    def seal(self) -> dict[str, Any]:
        """The row's columns, JSON serialised (bytes); it never changes again."""
        if self._sealed is None:
            self._sealed = {
                "revision": self.revision, "sequence_number": self.sequence_number, "reason": self.reason,
                "base_revision": self.base_revision, "view": self.view,
                "ops": None if self.ops is None else orjson.dumps(merge_appends(self.ops)),
                "snapshot": self.snapshot,
            }
            self.ops = None  # held once, serialised
        return self._sealed


def merge_appends(ops: list[Op]) -> list[Op]:
    """The ops with each run of appends to one block as one append (each text joined once)."""
    merged: list[Op] = []
    run: list[str] = []
    for op in ops:
        if op[0] == "append" and run and merged[-1][1] == op[1]:
            run.append(op[2])
            continue
        if len(run) > 1:
            merged[-1] = ["append", merged[-1][1], "".join(run)]
        run = [op[2]] if op[0] == "append" else []
        merged.append(op)
    if len(run) > 1:
        merged[-1] = ["append", merged[-1][1], "".join(run)]
    return merged


class CheckpointBuilder:
    __slots__ = ("chain_max", "_ops", "_from", "_to", "_captured", "_chain", "_open", "_snapshot_of")

    def __init__(self, chain_max: int | None = None) -> None:
        self.chain_max = CHAIN_MAX if chain_max is None else chain_max
        self._ops: list[Op] = []  # published since the last capture ...
        self._from: int | None = None  # ... from this revision (None: nothing published since)
        self._to = -1  # ... to this one
        self._captured = -1  # the revision of the last capture (-1: the next row is a base)
        self._chain = 0  # ops rows since the last base
        self._open: CheckpointRow | None = None  # the last row, while the writer has not taken it
        self._snapshot_of: object = None  # the response (its assembler) whose snapshot was stored

    def published(self, patch: dict[str, Any]) -> None:
        """A patch the relay sent: the changes since the last capture, in order."""
        base = patch["base"]
        if self._from is None:
            self._from = base
        elif base != self._to:  # does not continue the ones held: the next row is a base
            self._ops = []
            self._from, self._captured = base, -1
        self._ops.extend(patch["ops"])
        self._to = patch["revision"]

    def capture(self, transcript: Transcript, reason: str) -> CheckpointRow | None:
        """The row holding the view now: a new one, the open one extended, or None when nothing
        changed since the last capture."""
        view = transcript.view
        revision = view.revision
        if revision == self._captured:
            return None
        # What to_dict() did for every checkpoint before, once per checkpoint still: the deltas'
        # str objects joined, or the runner would hold them all.
        transcript.compact()
        snapshot = None
        if (reason == "terminal" or (transcript.terminal and transcript.judged)) \
                and self._snapshot_of is not transcript.assembler:
            self._snapshot_of = transcript.assembler
            snapshot = orjson.dumps(transcript.snapshot())  # first: it joins each text once
        previous, ops = self._captured, self._ops
        continues = previous >= 0 and self._from == previous and self._to == revision
        self._ops, self._from, self._captured = [], None, revision
        sequence = transcript.last_sequence_number
        row = self._open if self._open is not None and not self._open.sealed else None
        if row is not None:  # the writer has not taken it: it holds this capture too
            if continues and row.ops is not None:
                row.ops.extend(ops)
            else:
                row.view, row.ops, row.base_revision = orjson.dumps(view.to_dict()), None, None
                self._chain = 0
            row.revision, row.sequence_number, row.reason = revision, sequence, reason
            if snapshot is not None:
                row.snapshot = snapshot
            return row
        if continues and self._chain < self.chain_max:
            self._chain += 1
            row = CheckpointRow(revision, sequence, reason, base_revision=previous, ops=ops, snapshot=snapshot)
        else:
            self._chain = 0
            row = CheckpointRow(revision, sequence, reason, view=orjson.dumps(view.to_dict()), snapshot=snapshot)
        self._open = row
        return row

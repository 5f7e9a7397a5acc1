"""One runner's checkpoints: when to take them (the core's CheckpointPolicy), what they hold,
and handing them to the process's writer with the raw events gathered since the last one.

A checkpoint is serialised once when it is captured. Its first one in this runner holds the whole
view (a base); every later one holds only the view ops since the previous one, coalesced (adjacent
appends to a block merged: about the text added, plus a few dozen bytes), so the checkpoints of an
answer take about its text once, not once per checkpoint (models.Checkpoint). Every
`CHAIN_MAX`-th is a base again, so materialising a view reads a bounded number of rows. The
Response snapshot is stored once per response, with the first checkpoint after it ended and
its text was judged (or the request's terminal one). The writer commits each request's states
in order (merging those of one round, writer.merge_states) and every event batch.

Captured right after a flush, every committed revision is a patch boundary: a viewer starting
from a checkpoint can chain the patches that follow it.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from ..models import RawJSON
from ..streaming.coalescer import Coalescer
from ..streaming.policies import CheckpointPolicy
from ..streaming.transcript import Transcript
from .writer import CheckpointNotWritten, CheckpointWriter

logger = logging.getLogger(__name__)

# Ops rows after a base before the next base: 128 checkpoints are over a minute of streaming
# (they come at most every 500 ms), so a 2,000-delta answer has one base; a reader applies at
# most this many rows' ops.
CHAIN_MAX = 128


class Checkpointer:
    def __init__(self, request_id: uuid.UUID, writer: CheckpointWriter, policy: CheckpointPolicy,
                 on_failure: Callable[[CheckpointNotWritten], None]) -> None:
        self.request_id = request_id
        self._on_failure = on_failure
        self.policy = policy
        self._writer = writer
        self._captured_revision = -1
        self._since = Coalescer(max_pending_ops=sys.maxsize)  # the view's ops since the last capture
        self._chain = 0  # ops rows since the last base
        self._snapshot_of: object = None  # the response (its assembler) whose snapshot was stored
        self._last_write: asyncio.Future[None] | None = None
        self.unwritten = 0  # bytes of raw events handed to the writer and not yet committed
        self.writes = 0  # rows handed to the writer (the benchmark reads it)

    def published(self, patch: dict[str, Any]) -> None:
        """Every patch of the view, as the patch stream sent it: the changes since the last
        capture, already coalesced and once per patch, not once per chunk. Every capture follows
        a flush, so what was published is every change up to the view's revision."""
        try:
            self._since.push(patch["base"], patch["ops"], patch["revision"])
        except ValueError:  # ops that do not continue the ones held: the next capture is a base
            self._since.flush()
            self._captured_revision = -1

    def capture(self, transcript: Transcript, batch: dict[str, Any] | None, reason: str, now: float) -> None:
        """Commit the state now with `batch` (unless nothing changed since the last one)."""
        view = transcript.view
        state: dict[str, Any] | None = None
        if view.revision != self._captured_revision:
            since = self._since.flush()
            # What to_dict() did for every checkpoint before, once per checkpoint still: the deltas'
            # str objects (about 55 bytes each) joined, or the runner would hold them all.
            transcript.compact()
            state = {"revision": view.revision, "sequence_number": transcript.last_sequence_number,
                     "reason": reason, "base_revision": None, "view": None, "ops": None, "snapshot": None}
            # Once per response: at the first checkpoint after it ended and its text was judged
            # (progressive mode shows text before its verdict: a flag may still retract it), or
            # at the request's end.
            if (reason == "terminal" or (transcript.terminal and transcript.judged)) \
                    and self._snapshot_of is not transcript.assembler:
                self._snapshot_of = transcript.assembler
                state["snapshot"] = RawJSON(orjson.dumps(transcript.snapshot()))  # first: it joins each text once
            if (since is not None and since["base"] == self._captured_revision and since["revision"] == view.revision
                    and self._chain < CHAIN_MAX):
                state["base_revision"] = since["base"]
                state["ops"] = RawJSON(orjson.dumps(since["ops"]))
                self._chain += 1
            else:
                state["view"] = RawJSON(orjson.dumps(view.to_dict()))
                self._chain = 0
            self._captured_revision = view.revision
        elif batch is None:
            return
        self.policy.committed(now, interval=reason == "interval")
        self._submit(state, batch)

    def hand_over(self, batch: dict[str, Any] | None) -> None:
        """Only the raw events (a fast stream's log, between checkpoints)."""
        if batch is not None:
            self._submit(None, batch)

    def _submit(self, state: dict[str, Any] | None, batch: dict[str, Any] | None) -> None:
        size = len(batch["data"]) if batch else 0
        self.unwritten += size
        written = self._writer.submit(self.request_id, state, batch)
        self._last_write = written
        self.writes += (state is not None) + (batch is not None)

        def settled(future: asyncio.Future[None]) -> None:
            self.unwritten -= size
            error = None if future.cancelled() else future.exception()
            if error is not None:
                logger.error("checkpoint of %s not written: %s", self.request_id, error)
                if isinstance(error, CheckpointNotWritten):
                    self._on_failure(error)

        written.add_done_callback(settled)

    async def drain(self) -> None:
        """Wait until everything captured so far is committed (rounds commit in order)."""
        if self._last_write is not None:
            if not self._last_write.done():
                self._writer.hurry()
            try:
                await asyncio.shield(self._last_write)
            except Exception:  # logged by the callback; the terminal write still goes ahead
                pass

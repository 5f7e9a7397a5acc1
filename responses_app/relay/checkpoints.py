"""One runner's checkpoints: taken when the core's CheckpointPolicy says, built by the core's
CheckpointBuilder (what a row holds: a base, ops or a snapshot), and handed to the process's
writer with the raw events gathered since the last one. The writer commits each request's rows
and event batches in order, one round at a time; the first submit of a row is its only one (a
capture before its round goes into it, see streaming/checkpoints.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from ..streaming.checkpoints import CheckpointBuilder, CheckpointRow
from ..streaming.policies import CheckpointPolicy
from ..streaming.transcript import Transcript
from .checkpoint_writer import CheckpointNotWritten, CheckpointWriter

logger = logging.getLogger(__name__)


class Checkpointer:
    def __init__(self, request_id: uuid.UUID, writer: CheckpointWriter, policy: CheckpointPolicy,
                 on_failure: Callable[[CheckpointNotWritten], None]) -> None:
        self.request_id = request_id
        self._on_failure = on_failure
        self.policy = policy
        self.builder = CheckpointBuilder()
        self._writer = writer
        self._submitted: CheckpointRow | None = None  # the last row handed to the writer
        self._last_write: asyncio.Future[None] | None = None
        self.unwritten = 0  # bytes of raw events handed to the writer and not yet committed
        self.writes = 0  # rows handed to the writer (the benchmark reads it)

    def published(self, patch: dict[str, Any]) -> None:
        """Every patch of the view, as the patch stream sent it. Every capture follows a flush, so
        what was published is every change up to the view's revision."""
        self.builder.published(patch)

    def capture(self, transcript: Transcript, batch: dict[str, Any] | None, reason: str, now: float) -> None:
        """Commit the state now with `batch` (unless nothing changed since the last one)."""
        row = self.builder.capture(transcript, reason)
        if row is None and batch is None:
            return
        self.policy.committed(now, interval=reason == "interval")
        if row is self._submitted:  # the open row took this capture: the writer has it already
            row = None
        self._submit(row, batch)

    def hand_over(self, batch: dict[str, Any] | None) -> None:
        """Only the raw events (a fast stream's log, between checkpoints)."""
        if batch is not None:
            self._submit(None, batch)

    def _submit(self, row: CheckpointRow | None, batch: dict[str, Any] | None) -> None:
        if row is None and batch is None:
            return
        size = len(batch["data"]) if batch else 0
        self.unwritten += size
        written = self._writer.submit(self.request_id, row, batch)
        self._last_write = written
        if row is not None:
            self._submitted = row
        self.writes += (row is not None) + (batch is not None)

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

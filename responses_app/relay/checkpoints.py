"""One runner's checkpoints: when to take them (the core's CheckpointPolicy), what they hold,
and handing them to the process's writer with the raw events gathered since the last one.

A checkpoint is the view and the Response snapshot at a revision, serialised once when it is
captured; the writer commits the newest state per request and every event batch, in order.
Captured right after a flush, every committed revision is a patch boundary: a viewer starting
from a checkpoint can chain the patches that follow it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from ..models import RawJSON
from ..streaming.policies import CheckpointPolicy
from ..streaming.transcript import Transcript
from .writer import CheckpointNotWritten, CheckpointWriter

logger = logging.getLogger(__name__)


class Checkpointer:
    def __init__(self, request_id: uuid.UUID, writer: CheckpointWriter, policy: CheckpointPolicy,
                 on_failure: Callable[[CheckpointNotWritten], None]) -> None:
        self.request_id = request_id
        self._on_failure = on_failure
        self.policy = policy
        self._writer = writer
        self._captured_revision = -1
        self._last_write: asyncio.Future[None] | None = None
        self._unwritten = 0  # bytes of raw events handed to the writer and not yet committed
        self.writes = 0  # rows handed to the writer (the benchmark reads it)

    @property
    def unwritten(self) -> int:
        return self._unwritten

    def capture(self, transcript: Transcript, batch: dict[str, Any] | None, reason: str, now: float) -> None:
        """Commit the state now with `batch` (unless nothing changed since the last one)."""
        view = transcript.view
        state = None
        if view.revision != self._captured_revision:
            self._captured_revision = view.revision
            snapshot = transcript.snapshot()  # first: it joins each text once for both
            state = {
                "revision": view.revision, "sequence_number": transcript.last_sequence_number, "reason": reason,
                "view": RawJSON(orjson.dumps(view.to_dict())), "snapshot": RawJSON(orjson.dumps(snapshot)),
            }
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
        self._unwritten += size
        written = self._writer.submit(self.request_id, state, batch)
        self._last_write = written
        self.writes += (state is not None) + (batch is not None)

        def settled(future: asyncio.Future[None]) -> None:
            self._unwritten -= size
            error = None if future.cancelled() else future.exception()
            if error is not None:
                logger.error("checkpoint of %s not written: %s", self.request_id, error)
                if isinstance(error, CheckpointNotWritten):
                    self._on_failure(error)

        written.add_done_callback(settled)

    async def drain(self) -> None:
        """Wait until everything captured so far is committed (rounds commit in order)."""
        if self._last_write is not None:
            try:
                await asyncio.shield(self._last_write)
            except Exception:  # logged by the callback; the terminal write still goes ahead
                pass

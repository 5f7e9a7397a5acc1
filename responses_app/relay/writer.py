"""One checkpoint writer per process: every runner's checkpoints and raw-event batches go to the
database together, one transaction and two bulk INSERTs per round.

Measured with 150 streams on PostgreSQL: one transaction per runner per checkpoint kept eight
database threads busy in the ORM, and their GIL time delayed the event loop's patches. A round
takes whatever accumulated while the previous one was in flight, so it batches more under load
and adds no delay when idle. For each request, the newest state wins; no event batch is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from .. import services

logger = logging.getLogger(__name__)


class _Entry:
    __slots__ = ("state", "batches", "waiters")

    def __init__(self) -> None:
        self.state: dict[str, Any] | None = None
        self.batches: list[dict[str, Any]] = []
        self.waiters: list[asyncio.Future[None]] = []


class CheckpointWriter:
    def __init__(self, run_db: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        self._db = run_db
        self._pending: dict[uuid.UUID, _Entry] = {}
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0

    def submit(self, request_id: uuid.UUID, state: dict[str, Any] | None,
               batch: dict[str, Any] | None) -> asyncio.Future[None]:
        """Queue a checkpoint state (newest wins) and/or an event batch; resolves once committed."""
        loop = asyncio.get_running_loop()
        entry = self._pending.get(request_id)
        if entry is None:
            entry = self._pending[request_id] = _Entry()
        if state is not None:
            entry.state = state
        if batch is not None:
            entry.batches.append(batch)
        done: asyncio.Future[None] = loop.create_future()
        entry.waiters.append(done)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name="relay-checkpoint-writer")
        return done

    async def _run(self) -> None:
        while self._pending:
            pending, self._pending = self._pending, {}
            items = [(request_id, e.state, e.batches) for request_id, e in pending.items()]
            try:
                await self._db(services.checkpoints_commit_many)(items=items)
            except Exception as exc:
                logger.exception("checkpoint round of %d requests failed", len(items))
                for entry in pending.values():
                    for waiter in entry.waiters:
                        if not waiter.done():
                            waiter.set_exception(exc)
                continue
            self.rounds += 1
            for entry in pending.values():
                for waiter in entry.waiters:
                    if not waiter.done():
                        waiter.set_result(None)

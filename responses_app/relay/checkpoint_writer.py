"""One checkpoint writer per process: every runner's checkpoint rows and raw-event batches go to
the database together, one transaction and two bulk writes per round. It only batches: what a
row holds is decided by the core (streaming/checkpoints.py), how it is encoded by storage.py.

Why one writer: one transaction per runner per checkpoint kept every database thread busy in the
ORM, and their GIL time delayed the event loop's patches (bench/README.md, relay). A round
takes whatever accumulated while the previous one was in flight, so it batches more under load
and adds no delay when idle. A round seals the rows it takes (a row is open to its runner's next
capture until then, so a round usually holds one row per request); nothing is dropped or merged.

Rounds are gathered: one starts no sooner than `gather_s` after the one before it started
(RELAY_CHECKPOINT_GATHER_MS), unless a runner waits for its rows (`hurry`: the terminal
checkpoint, backpressure). Without it, under load rounds followed each other as fast as
PostgreSQL answered, each of one or two requests, and the writer thread's CPU went to per-round
work (round trips, statement building, the thread hop and the GIL handoffs around each) where a
few larger rounds cost a fraction of that (bench/README.md, relay).

Contract of `submit`'s future: it resolves once the row and batch are committed, and only
then. A round that fails as a whole (the database is away) is retried with backoff, its rows
kept, for up to `give_up_s`; meanwhile the futures stay pending, which is the runner's
backpressure (it waits once its unwritten bytes pass its bound, so what is held stays bounded).
Within a round each request's rows have a savepoint of their own (services.checkpoints_commit_many):
a request whose rows the database refuses, or still unwritten when the writer gives up, gets
`CheckpointNotWritten` on its futures, and so does every later submit for it, since writing
later events after lost ones would leave a hole in its event log. The runner turns that into
the request's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from .. import logcontext, services
from ..streaming.checkpoints import CheckpointRow

logger = logging.getLogger(__name__)

RETRY_FIRST_S = 0.2
RETRY_MAX_S = 5.0
GIVE_UP_S = 120.0  # longer than a PostgreSQL restart or failover, shorter than a viewer's patience


class CheckpointNotWritten(Exception):
    """A request's checkpoint or events could not be committed; its event log would have a hole."""

    def __init__(self, request_id: uuid.UUID, cause: BaseException) -> None:
        super().__init__(f"checkpoint of {request_id} not written: {cause!r}")
        self.request_id = request_id
        self.cause = cause


class _Entry:
    __slots__ = ("rows", "batches", "waiters")

    def __init__(self) -> None:
        self.rows: list[CheckpointRow] = []
        self.batches: list[dict[str, Any]] = []
        self.waiters: list[asyncio.Future[None]] = []


class CheckpointWriter:
    def __init__(self, run_db: Callable[[Callable[..., Any]], Callable[..., Any]], *,
                 give_up_s: float = GIVE_UP_S, retry_first_s: float = RETRY_FIRST_S,
                 retry_max_s: float = RETRY_MAX_S, gather_s: float = 0.0) -> None:
        self._db = run_db
        self.gather_s = gather_s
        self._hurried = asyncio.Event()  # someone waits for what is queued (see hurry)
        self._round_started = float("-inf")
        self._pending: dict[uuid.UUID, _Entry] = {}
        self._failed: dict[uuid.UUID, CheckpointNotWritten] = {}
        self._task: asyncio.Task[None] | None = None
        self.give_up_s = give_up_s
        self.retry_first_s = retry_first_s
        self.retry_max_s = retry_max_s
        self.rounds = 0
        self.failed_rounds = 0

    def submit(self, request_id: uuid.UUID, row: CheckpointRow | None,
               batch: dict[str, Any] | None) -> asyncio.Future[None]:
        """Queue a checkpoint row and/or an event batch; resolves once committed."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        failure = self._failed.get(request_id)
        if failure is not None:
            done.set_exception(failure)
            return done
        entry = self._pending.get(request_id)
        if entry is None:
            entry = self._pending[request_id] = _Entry()
        if row is not None:
            entry.rows.append(row)
        if batch is not None:
            entry.batches.append(batch)
        entry.waiters.append(done)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name="relay-checkpoint-writer")
        return done

    def hurry(self) -> None:
        """Someone waits for what is queued: the next round starts as soon as the one in flight
        (if any) is done, not at the gather's end."""
        self._hurried.set()

    async def _gather(self, loop: asyncio.AbstractEventLoop) -> None:
        wait = self._round_started + self.gather_s - loop.time()
        if wait > 0 and not self._hurried.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._hurried.wait()
        self._hurried.clear()

    def forget(self, request_id: uuid.UUID) -> None:
        """Drop what is remembered of a request's failure (once the runner has ended it)."""
        self._failed.pop(request_id, None)

    def pending_requests(self) -> int:
        return len(self._pending)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        failing_since: float | None = None
        delay = self.retry_first_s
        while self._pending:
            await self._gather(loop)
            self._round_started = loop.time()
            pending, self._pending = self._pending, {}
            # Sealed here, on the loop: from now on their runners' captures go into new rows.
            items = [(request_id, [row.seal() for row in e.rows], e.batches) for request_id, e in pending.items()]
            try:
                refused: dict[uuid.UUID, Exception] = await self._db(services.checkpoints_commit_many)(items=items)
            except Exception as exc:
                self.failed_rounds += 1
                now = loop.time()
                failing_since = now if failing_since is None else failing_since
                if now - failing_since >= self.give_up_s:
                    logger.error("checkpoint round of %d requests failed for %.0f s, giving up: %r",
                                 len(items), now - failing_since, exc)
                    self._fail(pending, {request_id: exc for request_id in pending})
                    failing_since, delay = None, self.retry_first_s
                    continue
                logger.warning("checkpoint round of %d requests failed (%r); retrying in %.1f s",
                               len(items), exc, delay)
                self._requeue(pending)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.retry_max_s)
                continue
            if failing_since is not None:
                logger.warning("checkpoint round written after %.1f s of failures", loop.time() - failing_since)
            failing_since, delay = None, self.retry_first_s
            self.rounds += 1
            if refused:
                for request_id, cause in refused.items():
                    with logcontext.about(request_id):
                        logger.error("checkpoint of %s refused by the database: %r", request_id, cause)
                self._fail({rid: pending[rid] for rid in refused}, refused)
            for request_id, entry in pending.items():
                if request_id not in refused:
                    for waiter in entry.waiters:
                        if not waiter.done():
                            waiter.set_result(None)

    def _requeue(self, pending: dict[uuid.UUID, _Entry]) -> None:
        """Put a failed round's entries back ahead of what was submitted meanwhile: rows and
        batches keep their order."""
        newer, self._pending = self._pending, pending
        for request_id, entry in newer.items():
            old = self._pending.get(request_id)
            if old is None:
                self._pending[request_id] = entry
                continue
            old.rows.extend(entry.rows)
            old.batches.extend(entry.batches)
            old.waiters.extend(entry.waiters)

    def _fail(self, entries: dict[uuid.UUID, _Entry], causes: dict[uuid.UUID, Exception]) -> None:
        for request_id, entry in entries.items():
            failure = CheckpointNotWritten(request_id, causes[request_id])
            self._failed[request_id] = failure
            # Whatever was submitted for it meanwhile would follow the lost rows: refuse it too.
            later = self._pending.pop(request_id, None)
            for waiter in entry.waiters + (later.waiters if later else []):
                if not waiter.done():
                    waiter.set_exception(failure)

"""Where one runner's results go, and when: patches to viewers, checkpoints and the raw event log
to the database. The core's policies decide when (`FlushPolicy`, `CheckpointPolicy`: time passed
in); this shell only owns its next deadline (a policy's, when it comes without another chunk: on the
process's one timer, deadlines.py) and the backpressure when the database falls behind.

Every change of the view passes through `changed()` as the ops the core returned; nothing else
reads or writes the view here except to serialise it.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable
from typing import Any

from ..conf import app_settings
from ..ops import metrics
from ..streaming.policies import CheckpointPolicy
from ..streaming.transcript import HANDED_OVER, Ops, Step, Transcript
from . import eventlog
from .checkpoint_writer import CheckpointNotWritten
from .checkpointer import Checkpointer
from .gate_checks import SafetyChecks
from .hub import Hub
from .patches import PatchStream

LOG_BACKLOG_BYTES = 256 * 1024  # raw events waiting for the database before the runner waits too


@functools.lru_cache(maxsize=4)
def _redact_fields(fields: tuple[str, ...]) -> frozenset[str]:
    """One frozenset per process, not one per stream (bench/README.md, storage)."""
    return frozenset(fields)


class Delivery:
    def __init__(self, request_id: str, hub: Hub, transcript: Transcript,
                 on_write_failure: Callable[[CheckpointNotWritten], None]) -> None:
        self.request_id = request_id
        self.hub = hub
        self.transcript = transcript
        self._loop = asyncio.get_running_loop()
        self.patches = PatchStream(transcript.view, self.publish, app_settings.FLUSH_INTERVAL_MS / 1000,
                                   max_wait=app_settings.FLUSH_MAX_WAIT_MS / 1000,
                                   min_chars=app_settings.FLUSH_MIN_CHARS)
        self.checkpoints = Checkpointer(uuid.UUID(request_id), hub.writer, CheckpointPolicy(
            interval=app_settings.CHECKPOINT_INTERVAL_MS / 1000,
            min_events=app_settings.CHECKPOINT_MIN_EVENTS,
            max_interval=app_settings.CHECKPOINT_MAX_INTERVAL_MS / 1000, now=self._loop.time()),
            on_write_failure)
        self.log = eventlog.EventLog(_redact_fields(tuple(app_settings.REDACT_FIELDS)), transcript.secrets)
        self.tally = metrics.StreamTally()  # the event counters, as deltas at each checkpoint
        self._deadlines = hub.deadlines  # the process's one timer for every delivery's deadline
        self.safety: SafetyChecks | None = None  # the runner sets it when a safety mode applies
        self._scale = 1.0  # the pacer's, as last given to the patch policy

    # --- input ----------------------------------------------------------------------------------

    def events(self, step: Step, now: float) -> bool:
        """A chunk's events and changes (`now`: the loop's time it came); True when the database
        is behind and the caller should `catch_up()` before reading on (the upstream then waits
        in the socket, not in memory). Called for every chunk: one pass, no call it can spare."""
        events = step.events
        held = self.log.add(events, step.raw)
        change = step.change
        checkpoints = self.checkpoints
        checkpoints.policy.push(now, len(events), bool(change.ops))
        self._changed(change, step.boundary, now)
        if held >= eventlog.LOG_FLUSH_BYTES:  # a fast stream: bound what it holds in memory
            checkpoints.hand_over(self.log.take())
            held = 0
        return held + checkpoints.unwritten > LOG_BACKLOG_BYTES

    def segment(self, index: int) -> None:
        """The events added from now on are segment `index`'s: what is held of the one before goes
        first as a batch of its own (a takeover rebuilds each response from its own segments)."""
        if len(self.log):
            self.checkpoints.hand_over(self.log.take())
        self.log.segment_index = index

    def changed(self, change: Ops, *, boundary: bool = False) -> None:
        """A change of the view outside a chunk (an ending, a tool's result, a verdict)."""
        now = self._loop.time()
        if change.ops:
            self.checkpoints.policy.push(now, changed=True)
        self._changed(change, boundary, now)

    def _changed(self, change: Ops, boundary: bool, now: float) -> None:
        if change.windows and self.safety is not None:
            self.safety.check(change.windows)
        patches = self.patches
        scale = self.hub.pacer.scale
        if scale != self._scale:
            self._scale = patches.policy.scale = scale
        if patches.push(change, now, boundary=boundary):
            self._flush(now, "boundary" if boundary else None)
        else:
            # Every chunk: while a stream flows, the checkpoint's deadline moves with it (an
            # interval ahead), so it fires only once the stream pauses; a deadline left armed while
            # it was less than an interval away would fire every interval and find nothing due.
            self._arm(now)

    def commit_asked(self) -> bool:
        """A web process has a viewer that holds a newer view than the committed one (a tab moved
        there by a restart): commit now instead of at the next interval, at most once an interval."""
        now = self._loop.time()
        if not self.checkpoints.policy.may_commit(now):
            return False
        self._flush(now, "interval")
        return True

    async def catch_up(self) -> None:
        """Commit what is held and wait for the database."""
        self._flush(self._loop.time(), "interval")
        await self.checkpoints.drain()

    async def final(self) -> None:
        """The terminal checkpoint, committed before the caller marks the request ended."""
        self._flush(self._loop.time(), "terminal")
        await self.checkpoints.drain()

    async def hand_over(self) -> None:
        """Its process is stopping: every change applied so far published, and committed with the
        raw events it came from, so the runner that takes over goes on from exactly here."""
        self._flush(self._loop.time(), HANDED_OVER)
        await self.checkpoints.drain()

    def publish(self, message: dict[str, Any], text: str) -> None:
        self.hub.publish(self.request_id, message, text)

    def discard(self) -> None:
        """Another runner owns the request: nothing held here is published or written."""
        self._deadlines.clear(self)
        self.log.take()

    def close(self) -> None:
        self._deadlines.clear(self)
        self.patches.close()

    @property
    def writes(self) -> int:
        return self.checkpoints.writes

    # --- timing ---------------------------------------------------------------------------------

    def _flush(self, now: float, checkpoint: str | None = None) -> None:
        checkpoints = self.checkpoints
        patch = self.patches.flush(now)
        if patch is not None:
            checkpoints.published(patch)
        if checkpoint is None and checkpoints.policy.due(now):
            checkpoint = "interval"
        if checkpoint is not None:
            checkpoints.capture(self.transcript, self.log.take(), checkpoint, now)
            self.tally.report(self.transcript.counters())
        self._arm(now)

    def _arm(self, now: float) -> None:
        """The deadline of whichever falls due first: pending patches, or a quiet stream's commit."""
        # (called for every chunk: no list, no min() over it)
        policy = self.patches.policy
        at = policy.next_deadline()
        commit = self.checkpoints.policy.next_deadline(now, not_before=policy.interval)
        if commit is not None and (at is None or commit < at):
            at = commit
        gate = self.transcript.gate
        if gate is not None:
            window = gate.next_deadline()
            if window is not None and (at is None or window < at):
                at = window
        if at is None:
            self._deadlines.clear(self)
        else:
            self._deadlines.set(self, at)

    def on_deadline(self) -> None:
        now = self._loop.time()
        gate = self.transcript.gate
        if gate is not None and (at := gate.next_deadline()) is not None and at <= now:
            self.changed(self.transcript.safety_tick(now))  # windows no later than the interval
        if self.checkpoints.policy.due(now):
            self._flush(now, "interval")
        elif self.patches.due(now):
            self._flush(now)
        else:
            self._arm(now)

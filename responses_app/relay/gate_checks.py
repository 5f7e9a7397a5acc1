"""The safety gate's shell: it runs the checks the core's gate asks for, off the read loop.

The gate (streaming/gate.py) decides what is a window, what is held and what is shown; this
shell only judges windows (`checkers.judge`: the checker, its timeout and error policy), at most
`concurrency` at once per request, hands each verdict back to the transcript, sends the ops that
caused through the delivery, and stores every verdict (batched on the relay's database threads).
A flagged window calls `on_flag` once: the runner cancels the upstream and the request ends
`incomplete` with reason `content_filter`.

A flagged window the checker could not localise comes back from the gate to be judged once more
without its context (`Window.alone`, even though the request has stopped); the flagged verdict
is stored once that second verdict says where the text was stopped.

In progressive mode the read loop never waits for a check (checks are tasks); in buffered mode
text simply stays in the gate until its verdict comes. `settle()` is the one place that waits:
at the end of an upstream stream, before tools run, before a continuation and before the end.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from django.utils import timezone

from .. import services
from ..safety.checkers import Checker, Verdict, judge
from ..streaming.gate import Window
from ..streaming.transcript import Ops, Transcript
from .dbthreads import db

logger = logging.getLogger(__name__)

Record = Callable[[list[dict[str, Any]]], Awaitable[None]]


class SafetyChecks:
    def __init__(self, request_id: uuid.UUID, mode: str, transcript: Transcript, checker: Checker, *,
                 changed: Callable[[Ops, bool], None], on_flag: Callable[[], None], timeout: float,
                 fail_closed: bool, concurrency: int = 4, record: Record | None = None,
                 on_first_text: Callable[[], None] | None = None) -> None:
        self.request_id = request_id
        self.mode = mode
        self.transcript = transcript
        self.checker = checker
        self._changed = changed
        self._on_flag = on_flag
        self._on_first_text = on_first_text
        self._timeout = timeout
        self._fail_closed = fail_closed
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._record = record or self._store
        self._rows: list[dict[str, Any]] = []
        # A flagged verdict waiting for its window's judgement alone, and its place among the rows.
        self._held: tuple[Window, Verdict, str, dict[str, Any]] | None = None
        self._writing: asyncio.Task[None] | None = None
        self.calls = 0  # checks made
        self.errors = 0  # checks that failed or timed out (their verdict followed the error policy)
        self.flagged = False

    def check(self, windows: list[Window]) -> None:
        """Judge these windows (from an `Ops`), each in a task of its own."""
        loop = asyncio.get_running_loop()
        for window in windows:
            task = loop.create_task(self._check(window))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _check(self, window: Window) -> None:
        async with self._slots:
            gate = self.transcript.gate
            if gate is None or (gate.stopped is not None and not window.alone):
                return  # the request stopped while this waited: its text is never shown
            self.calls += 1
            verdict = await judge(self.checker, window.text, context=window.judged_context(),
                                  kind=window.kind,  # type: ignore[arg-type]
                                  timeout=self._timeout, fail_closed=self._fail_closed)
        change, action, first_text = self.transcript.safety_verdict(window.id, verdict.flagged, verdict.start)
        gate = self.transcript.gate
        if window.alone:  # where the text stops is known now: the flagged verdict first, then this one
            self._release_held()
            self.verdict(window, verdict, action)
        elif verdict.flagged and any(w.alone for w in change.windows):
            place: dict[str, Any] = {}  # stored in order: nothing after it is written before it
            self._rows.append(place)
            self._held = (window, verdict, action, place)
        else:
            self.verdict(window, verdict, action,
                         stopped_at=gate.stopped_at if gate and gate.stopped is window else None)
        self._changed(change, verdict.flagged)
        if first_text and self._on_first_text is not None:
            self._on_first_text()
        if verdict.flagged and not self.flagged:
            self.flagged = True
            self._on_flag()

    def verdict(self, window: Window, verdict: Verdict, action: str, *, stopped_at: int | None = None) -> None:
        """Every verdict passes here: stored, counted. The verdict that stopped the request
        (`stopped_at`: where its field's text was cut, at or before the window) is stored from
        there: its offsets and text are what it took back, context included."""
        self._rows.append(self._row(window, verdict, action, stopped_at))
        self._start_writing()

    def _row(self, window: Window, verdict: Verdict, action: str, stopped_at: int | None) -> dict[str, Any]:
        start, text = window.start, window.text
        if stopped_at is not None and stopped_at < window.start:
            judged = window.context + window.text
            start, text = stopped_at, judged[len(judged) - (window.end - stopped_at):]
        if verdict.error:
            self.errors += 1
            logger.warning("safety check of %s failed (%s): %s", self.request_id, verdict.error,
                           "flagged" if verdict.flagged else "passed")
        return {
            "kind": window.kind, "mode": self.mode, "block_id": window.block_id, "start": start,
            "end": window.end, "text": text, "flagged": verdict.flagged, "action": action,
            "checker": verdict.checker, "categories": list(verdict.categories), "error": verdict.error,
            "elapsed_ms": verdict.elapsed * 1000, "created": timezone.now(),
        }

    def _start_writing(self) -> None:
        if self._writing is None:
            self._writing = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        try:
            while self._rows and self._rows[0]:  # an empty row holds a place: it waits (_release_held)
                ready = next((i for i, row in enumerate(self._rows) if not row), len(self._rows))
                rows, self._rows = self._rows[:ready], self._rows[ready:]
                try:
                    await self._record(rows)
                except Exception:  # an audit row lost is logged; it never stops the answer
                    logger.exception("safety verdicts of %s not stored", self.request_id)
        finally:
            self._writing = None

    async def _store(self, rows: list[dict[str, Any]]) -> None:
        await db(services.safety_verdicts_record)(request_id=self.request_id, verdicts=rows)

    async def settle(self) -> None:
        """The stream ended: every open window is judged, and every verdict is in."""
        self._changed(self.transcript.safety_close(), False)
        # Only the checks still running: one that ended in this turn of the loop leaves the set at
        # the next turn (its done callback), and gather returns at once, without yielding, when all
        # it is given are done (Python 3.12): waiting on those spun here forever, the loop frozen.
        while running := [task for task in self._tasks if not task.done()]:
            await asyncio.wait(running)

    def _release_held(self) -> None:
        if self._held is not None:
            window, verdict, action, place = self._held
            self._held = None
            gate = self.transcript.gate
            place.update(self._row(window, verdict, action, gate.stopped_at if gate is not None else None))
            self._start_writing()

    async def drain(self) -> None:
        """Every verdict stored (a flagged one whose second judgement never came, as it stands)."""
        self._release_held()
        while self._writing is not None:
            await asyncio.shield(self._writing)

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()

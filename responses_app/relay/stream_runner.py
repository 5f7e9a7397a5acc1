"""The stream runner: one per logical request, a thin loop around the streaming core.

It owns the upstream I/O and cancellation, and hands everything else to collaborators with one
job each: the `Transcript` (the core: bytes in, view ops and effects out), the `Delivery` (patches
to viewers, checkpoints and the raw event log to the database, when the core's policies say),
the `ToolRound` (each function call once per call id), `bodies` (what is POSTed). It decides
nothing about what an event means: the core says what happened, as values.

Outcomes are never guessed: a closed or silent connection is not success. What the loop does
after each segment (resume, reconcile, retry, a tool round, finish) is `steps.next_step`'s
decision, and how the request ends is `steps.conclude`'s, from one value: why the relay stopped
the request itself (`self.stopped`, an `outcomes.Stopped`), if it did. Cancelling, reconciling
and writing the outcome are the runner's endings (endings.py, its base).

May import: Django (models through services/selectors), httpx, the core, the hub (never the reverse).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import orjson
from django.utils import timezone

from .. import selectors, services
from ..conf import app_settings
from ..ops import logcontext, tracing
from ..safety import policy as safety_policy
from ..safety.checkers import checker_from_settings
from ..selectors import RunRequest
from ..streaming import vocabulary as v
from ..streaming.gate import SafetyGate
from ..streaming.transcript import Step, Transcript
from ..upstream.credentials import known
from ..upstream.http import EventFrames, Upstream, UpstreamHTTPError, stream_reader
from .bodies import build_body, continuation_body, full_context_body, stateless_continuation_body, stores
from .checkpoint_writer import CheckpointNotWritten
from .dbthreads import db
from .delivery import Delivery
from .endings import Kind
from .flag import Flag
from .gate_checks import SafetyChecks
from .hub import Hub
from .letgo import LettingGo
from .outcomes import Ending, SegmentResult, Stopped, connection_failure
from .precheck import precheck
from .steps import MAX_HTTP_RETRIES, Action, Next, Situation, next_step
from .toolround import ToolRound

logger = logging.getLogger(__name__)

MAX_TOOL_ROUNDS = 5
ERROR_GRACE_S = 2.0  # after an `error` event, how long a following response.failed may take


class StreamRunner(LettingGo):
    # Slots: with this many attributes a __dict__ outweighs them several times (bench/README.md, storage).
    __slots__ = ("request_id", "hub", "_upstream_factory", "finished", "_loop", "tools", "_response_id_saved",
                 "_last_bytes", "_reader", "_task", "log_context", "_rounds")  # and Endings.__slots__

    def __init__(self, request_id: str, hub: Hub, upstream_factory: Callable[[], Upstream] | None = None) -> None:
        self.request_id = request_id
        self.uuid = uuid.UUID(request_id)
        self.hub = hub
        self._upstream_factory = upstream_factory
        self.token = uuid.uuid4()
        # Flags, not asyncio.Events: an Event keeps a deque of waiters from the start (relay/flag.py).
        self.cancel_requested = Flag()
        self.finished = Flag()
        self.status: str = v.STREAMING
        self._loop = asyncio.get_running_loop()
        self.transcript = Transcript(max_event_bytes=app_settings.MAX_EVENT_BYTES, hold_window=app_settings.HOLD_WINDOW,
                                     max_output_items=app_settings.MAX_OUTPUT_ITEMS, secrets=known(),
                                     max_answer_chars=app_settings.MAX_ANSWER_CHARS)
        self.view = self.transcript.view
        self.delivery = Delivery(request_id, hub, self.transcript, self._on_write_failure)
        self.tools = ToolRound(self.uuid, lambda change: self.delivery.changed(change, boundary=True))
        self._segment_index = 0
        self._response_id_saved: str | None = None
        self._last_bytes = self._loop.time()
        self._reader: asyncio.Task[SegmentResult] | None = None
        self._hand_off_when_created = False
        self.stopped: Stopped | None = None  # why the relay stops the request itself, if it does
        self._error: tuple[str, str] | None = None
        self._counters = {"retries": 0, "disconnects": 0}
        self._task: asyncio.Task[None] | None = None
        self._own_writes = 0
        self.span = tracing.NO_SPAN
        self.log_context: logcontext.RequestContext | None = None
        self.safety: SafetyChecks | None = None  # a safety mode applies (docs/safety.md)
        self._marks: set[asyncio.Task[None]] = set()  # first_text_at writes a verdict released
        self._rounds: list[dict[str, Any]] | None = None  # a provider that keeps nothing: the turn's calls, outputs

    @property
    def writes(self) -> int:
        """Database writes this runner caused (the benchmark reads it)."""
        return self._own_writes + self.delivery.writes + self.tools.writes

    # --- lifecycle ----------------------------------------------------------------------------

    async def run(self) -> None:
        self._task = asyncio.current_task()  # type: ignore[assignment]
        # Every line logged from here (and by the keepers about this runner) names the request.
        self.log_context = logcontext.bind(self.request_id, lambda: self.transcript.response_id)
        if not await db(services.request_acquire_lease)(request_id=self.uuid, token=self.token):
            return  # single-flight: someone else runs it, or it already ended
        self.count_write()
        try:
            self.request = request = await db(selectors.request_get)(request_id=self.uuid)
        except Exception as exc:
            return await self._crashed(exc)
        if request.takeovers > services.MAX_TAKEOVERS:  # its runners kept dying without a word
            return await self._crashed(None)
        self.hub.leases.add(self)  # renewed, with everyone else's, by the hub's lease keeper
        self.hub.pacer.start()
        deadline = self._arm_deadline(request)
        try:
            # One pooled client per provider: the request's own, also after a takeover (or a test's).
            upstream = self._upstream_factory() if self._upstream_factory else self.hub.upstream(request.provider)
            recovering = bool(request.response_id or await db(selectors.segment_count)(request_id=self.uuid))
            self.span = tracing.start(request_id=self.request_id, model=request.model, takeover=recovering)
            await self._guard(request, recovering=recovering)
            if recovering:
                status = await self._recover(upstream, request)
            elif (blocked := await precheck(request)) is not None:
                self._error, status = blocked, v.FAILED  # RELAY_SAFETY_PRECHECK flagged it: nothing is sent
            else:
                status = await self._steps(upstream, Kind.INITIAL, await self._first_body(request), None)
            if self.transcript.limited:  # also when a final Response brought too many items
                self._stop(Ending(self.transcript.limit_reason), cancel=False)
            await self._finish(status, stopped=self.stopped)
        except asyncio.CancelledError:
            ending = self.stopped.ending if self.stopped is not None else None
            if ending is Ending.ABANDONED:
                self.delivery.discard()
                return  # the runner that took over writes and publishes from here on
            if ending is Ending.HANDED_OFF:
                return await self._hand_over()  # its process is stopping: another runner goes on
            raise  # process shutdown: the lease runs out and recovery takes over
        except Exception as exc:
            logger.exception("runner for %s failed", self.request_id)
            await self._end_after_crash(exc)
        finally:
            deadline.cancel()
            self.span.close()
            if self.safety is not None:
                self.safety.close()
            self.hub.writer.forget(self.uuid)
            self.hub.leases.discard(self)
            self.delivery.close()
            await (upstream.aclose() if self._upstream_factory else self.hub.release_upstream(self))
            self.finished.set()

    async def _guard(self, request: RunRequest, *, recovering: bool) -> None:
        """The request's safety mode (`off` costs nothing: no gate at all). A runner that takes
        over knows from the stored verdicts how far each text passed, and does not judge it again."""
        mode = safety_policy.mode_for(request.model)
        if mode == "off":
            return
        passed = await db(selectors.safety_passed)(request_id=self.uuid) if recovering else {}
        self.transcript.guard(SafetyGate(
            mode, unit=app_settings.SAFETY_WINDOW, max_chars=app_settings.SAFETY_WINDOW_CHARS,
            context_chars=app_settings.SAFETY_CONTEXT_CHARS, interval=app_settings.CHECKPOINT_INTERVAL_MS / 1000,
            passed=passed))
        self.safety = self.delivery.safety = SafetyChecks(
            self.uuid, mode, self.transcript, checker_from_settings(),
            changed=lambda change, urgent: self.delivery.changed(change, boundary=urgent),
            on_flag=self._on_flag, timeout=app_settings.SAFETY_TIMEOUT_MS / 1000,
            fail_closed=safety_policy.fail_closed(mode), on_first_text=self._on_first_released)

    def _on_first_released(self) -> None:
        """Buffered mode: the first answer text left the gate (the time people see it)."""
        self._marks.add(task := self._loop.create_task(self._mark_first("first_text_at")))
        task.add_done_callback(self._marks.discard)

    def _on_flag(self) -> None:
        """A window was flagged: stop reading and cancel the upstream; ends content_filter."""
        logger.info("request %s: the safety policy flagged its output; stopping", self.request_id)
        self._stop(Ending.FILTERED)

    def _arm_deadline(self, request: RunRequest) -> asyncio.TimerHandle:
        """RELAY_REQUEST_DEADLINE_S from the request's creation (a takeover keeps the clock):
        then the upstream is cancelled and the request ends incomplete, keeping what was shown."""
        age = (timezone.now() - request.created).total_seconds()
        return self._loop.call_later(max(app_settings.REQUEST_DEADLINE_S - age, 0), self._on_deadline)

    def _on_deadline(self) -> None:
        logger.warning("request %s reached its deadline (%ss); cancelling the upstream",
                       self.request_id, app_settings.REQUEST_DEADLINE_S)
        self._stop(Ending.DEADLINE)

    def _on_write_failure(self, error: CheckpointNotWritten) -> None:
        """The database refused this request's checkpoint or events for good: stop (and cancel the
        upstream) rather than go on with a hole in what is stored; the request ends `error`."""
        if self.stopped is None or self.stopped.ending is not Ending.WRITE_FAILED:
            self._stop(Ending.WRITE_FAILED, ("checkpoint_failed", "The relay could not store this answer "
                       f"({type(error.cause).__name__}); it was stopped rather than kept with a hole."))

    def cancel(self) -> None:
        """The explicit Stop: stop reading now, then cancel upstream."""
        self.cancel_requested.set()
        if self._reader is not None:
            self._reader.cancel()

    async def live_view(self) -> tuple[dict[str, Any], str]:
        """The view at a patch boundary and the status, for a viewer's first snapshot."""
        return await self.delivery.patches.snapshot(), self.status

    def view_now(self) -> dict[str, Any]:
        """The view as it stands, for a read that is not followed by patches (the JSON API)."""
        return self.view.to_dict()

    async def _recover(self, upstream: Upstream, request: RunRequest) -> str:
        """Take over a dead runner's request: rebuild from the event log; re-POST only if refused."""
        rounds = await db(selectors.event_log_by_round)(request_id=self.uuid)
        latest = await db(selectors.checkpoint_latest)(request_id=self.uuid)
        committed = (await db(selectors.views_latest)(request_ids=[self.uuid])).get(self.uuid)
        self._segment_index = await db(selectors.segment_count)(request_id=self.uuid)
        self.transcript.restore(rounds, *(latest or (0, "")), committed=committed)
        self.transcript.assume_response_id(request.response_id)
        self.delivery.tally.start_from(self.transcript.counters())  # the runner before counted these
        self._response_id_saved = self.transcript.response_id
        self._counters["retries"] += 1
        refused = 0 if request.response_id else await db(selectors.posts_refused)(request_id=self.uuid)
        step = next_step(self._situation(SegmentResult(Ending.RESTORED), upstream, refused=refused))
        if step.action is Action.RETRY:  # the upstream refused every POST: it goes on retrying them
            self._counters["retries"] = refused - 1  # the POSTs retried before (no runner counted them)
            return await self._steps(upstream, Kind.INITIAL, await self._first_body(request), step, refused - 1)
        return await self._steps(upstream, Kind.RESUME, None, None if step.action is Action.RESUME else step)

    async def _steps(self, upstream: Upstream, kind: str, body: dict[str, Any] | None, step: Next | None,
                     http_retries: int = 0) -> str:
        """Perform what `next_step` says after each segment (`step`: the first); the status."""
        resumes = 0
        result: SegmentResult | None = None
        while True:
            if step is None:
                if self.cancel_requested.is_set():
                    return await self._cancel_upstream(upstream)
                result = await self._segment(kind, upstream, body)
                flagged = await self._settle()
                step = next_step(self._situation(
                    result, upstream, kind=kind, flagged=flagged, resumes=resumes, http_retries=http_retries,
                    chained=bool(body and body.get("previous_response_id"))))
            action, self._counters["disconnects"] = step.action, self._counters["disconnects"] + step.disconnected
            if action is Action.FINISH:
                self._error = step.error or self._error
                return step.status
            if action is Action.CANCEL:
                return await self._cancel_upstream(upstream)
            if action is Action.RECONCILE:
                return await self._reconcile(upstream)
            if action is Action.TOOL_ROUND:
                outcome = await self._next_round(self.request, upstream)
                if isinstance(outcome, str):
                    return outcome
                body, kind, resumes, http_retries = outcome, Kind.CONTINUATION, 0, 0
            else:
                self._counters["retries"] += 1
                if action is Action.FULL_CONTEXT:
                    logger.info("request %s: previous response not found; sending the full context", self.request_id)
                    context = await db(selectors.conversation_context)(request=self.request)
                    body = full_context_body(self.request, context)
                    await db(services.conversation_chain_broken)(request_id=self.uuid)
                    kind = Kind.FULL_CONTEXT
                elif action is Action.RETRY:
                    http_retries += 1
                    status = result.http_status if result is not None else 429  # none: refused before a takeover
                    self.delivery.changed(self.transcript.retrying(status or 0, http_retries, MAX_HTTP_RETRIES),
                                          boundary=True)
                elif action is Action.RESUME:
                    resumes += 1
                    self.transcript.restart_decoder()
                    kind = Kind.RESUME
                if step.delay:
                    await asyncio.sleep(step.delay)
            step = None

    def _situation(self, result: SegmentResult, upstream: Upstream, **known: Any) -> Situation:
        # A background response can be streamed again, when the upstream can resume one.
        background = bool((self.request.params or {}).get("background")) and upstream.resumable
        return Situation(result, cancelled=self.cancel_requested.is_set(), terminal=self.transcript.terminal,
                         response_id=bool(self.transcript.response_id), background=background, **known)

    async def _first_body(self, request: RunRequest) -> dict[str, Any]:
        if (request.params or {}).get("full_context"):  # submitted after the chain broke
            return full_context_body(request, await db(selectors.conversation_context)(request=request))
        return build_body(request)

    async def _next_round(self, request: RunRequest, upstream: Upstream) -> dict[str, Any] | str:
        """After a response ended: run its tools; the continuation's body, or the request's status."""
        ended = self.transcript.status or v.UNKNOWN
        if ended != v.COMPLETED:
            return ended
        await self.delivery.catch_up()  # its end committed before a tool runs: a takeover goes on from here
        outputs = await self.tools.run(self.transcript, upstream)
        if outputs and await self._settle():  # a flagged tool output goes neither to viewers nor to the model
            return ended
        answers = await self.tools.approvals(self.transcript, self.cancel_requested)
        if answers is None:  # stopped while an approval was awaited
            self._stop(Ending.STOPPED_WAITING, cancel=False)
            return v.CANCELLED
        outputs += answers
        if not outputs or self.transcript.round >= MAX_TOOL_ROUNDS or self.cancel_requested.is_set():
            return ended
        if stores(request):
            body = continuation_body(request, self.transcript.response_id or "", outputs)
        else:  # a provider that keeps nothing: no chain, the whole turn again
            self._rounds = self._rounds or []
            body = stateless_continuation_body(request, await db(selectors.conversation_context)(request=request),
                                               self._rounds, self.transcript.function_calls(), outputs)
        self.transcript.next_response()
        return body

    # --- one upstream segment ---------------------------------------------------------------

    async def _segment(self, kind: str, upstream: Upstream, body: dict[str, Any] | None) -> SegmentResult:
        ctx: AbstractAsyncContextManager[httpx.Response | EventFrames]
        if kind == Kind.RESUME:
            starting_after = self.transcript.last_sequence_number
            ctx = upstream.resume_stream(self.transcript.response_id or "", starting_after)
        else:
            starting_after = None
            ctx = upstream.create_stream(body or {})
        segment = await db(services.segment_start)(
            request_id=self.uuid, index=self._segment_index, kind=kind, starting_after=starting_after,
            response_id=self.transcript.response_id or "")
        self.count_write()
        self.delivery.segment(self._segment_index)
        self._segment_index += 1
        events = [0]
        self._reader = self._loop.create_task(self._read(ctx, events))
        if self.cancel_requested.is_set():  # a Stop that came while no reader ran (the segment's write)
            self._reader.cancel()
        try:
            result = await self._reader
        except asyncio.CancelledError:
            if self.cancel_requested.is_set():
                result = SegmentResult(Ending.CANCELLED)
            elif self.stopped is not None and self.stopped.ending is Ending.STALLED:
                self.stopped = None
                result = SegmentResult(Ending.STALLED, f"no bytes for {app_settings.IDLE_TIMEOUT_S}s")
            else:
                raise
        except UpstreamHTTPError as exc:
            result = SegmentResult(Ending.HTTP_ERROR, exc.message, exc)
        except (httpx.HTTPError, OSError) as exc:
            result = connection_failure(exc, upstream.base)
        finally:
            self._reader = None
        if self.transcript.terminal:
            result = SegmentResult(Ending.TERMINAL)
        self.delivery.changed(self.transcript.take_ops(), boundary=True)
        await db(services.segment_end)(segment_id=segment.pk, outcome=result.outcome(self.transcript.status),
                                       events=events[0], response_id=self.transcript.response_id or "",
                                       http_status=result.http_status, detail=result.detail)
        self.count_write()
        return result

    async def _read(self, ctx: AbstractAsyncContextManager[httpx.Response | EventFrames],
                    events: list[int]) -> SegmentResult:
        transcript = self.transcript
        async with ctx as response:
            chunks, feed = stream_reader(response, transcript)  # SSE bytes, or one event per frame
            try:
                async with asyncio.timeout(None) as grace:
                    async for chunk in chunks:
                        self._last_bytes = now = self._loop.time()
                        step = feed(chunk, now)
                        del chunk  # nor the last chunk (up to upstream.CHUNK_BYTES) while the stream is quiet
                        if step.events:
                            events[0] += len(step.events)
                            behind = self.delivery.events(step, now)
                            if behind or step.first_text or step.first_tool or step.limited \
                                    or transcript.response_id != self._response_id_saved:
                                await self._after_step(step, behind)  # not a coroutine per chunk
                        terminal = step.terminal  # the transcript's state after the chunk
                        del step  # not held (with every string in it) while the stream is quiet
                        if terminal:
                            if transcript.settled:
                                return SegmentResult(Ending.TERMINAL)
                            if grace.when() is None:
                                # An `error` event: a response.failed or .incomplete that follows it
                                # decides the outcome, whatever the chunking; wait a little for it.
                                grace.reschedule(self._loop.time() + ERROR_GRACE_S)
            except TimeoutError:
                if not grace.expired():
                    raise
                return SegmentResult(Ending.TERMINAL)
        # The stream closed. Events completed after an oversized one come out of the last decode;
        # a terminal event waiting behind a gap ends the response now. Other held events wait for
        # a resume to fill their gap (a reconcile or the request's end applies them).
        step = transcript.finish(hold=True)
        if step.events or step.change.ops:
            events[0] += len(step.events)
            await self._after_step(step, self.delivery.events(step, self._loop.time()))
        # Closed without a terminal event: never success.
        return SegmentResult(Ending.TERMINAL if transcript.terminal else Ending.DROPPED)

    async def _after_step(self, step: Step, behind: bool) -> None:
        """What a chunk's step asks of the database, after the delivery took it."""
        if step.limited:  # past RELAY_MAX_OUTPUT_ITEMS or RELAY_MAX_ANSWER_CHARS: the rest is not read
            self._stop(Ending(self.transcript.limit_reason))
        response_id = self.transcript.response_id
        if response_id and response_id != self._response_id_saved:
            # Stored the moment response.created arrives: a crash after this can be reconciled.
            self._response_id_saved = response_id
            self.delivery.changed(self.transcript.retry_over(), boundary=True)
            await db(services.request_set_response_id)(request_id=self.uuid, response_id=response_id,
                                                       at=timezone.now())
            self.count_write(2)
            self.span.response_created(response_id)
            self.created()
        if step.first_text:
            self.span.first_token()
            await self._mark_first("first_text_at")
        if step.first_tool:
            await self._mark_first("first_tool_at")
        if behind:
            await self.delivery.catch_up()

    async def _mark_first(self, field: str) -> None:
        await db(services.request_mark_first)(request_id=self.uuid, field=field, at=timezone.now())
        self.count_write()

    def heartbeat(self) -> None:
        """Status and latest revision to every viewer: one that lost patches (a full queue across
        processes, a Redis blip) sees it is behind and resyncs; see the websocket protocol."""
        message = {"type": "ping", "status": self.status, "revision": self.delivery.patches.published}
        self.delivery.publish(message, orjson.dumps(message).decode())

    def final_text(self) -> str:
        return self.transcript.final_text()

    def check_idle(self, now: float) -> None:
        """Called by the hub's lease keeper: an upstream silent for too long counts as dropped."""
        idle_limit = app_settings.IDLE_TIMEOUT_S
        if now - self._last_bytes > idle_limit and self._reader is not None:
            with logcontext.using(self.log_context):
                logger.warning("upstream silent for %ss on %s; treating as dropped", idle_limit, self.request_id)
            self._stop(Ending.STALLED, cancel=False)
            self._reader.cancel()  # surfaces as a drop: resume or reconcile

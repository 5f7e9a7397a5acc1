"""The stream runner: one per logical request, owning its upstream streams, timers and writes.

It reads the upstream, feeds the streaming core, and turns the view's ops into coalesced patches
(leading edge: the first change after a quiet interval goes out at once, later ones at most once
per RELAY_FLUSH_INTERVAL_MS, and every boundary at once). It commits checkpoints at content-part
boundaries, at the end, and while text flows (see `_checkpoint_due`), with the raw events gathered
since the last one, in a single transaction; never one write per delta.

Outcomes are never guessed: a closed or silent connection is not success. With a response id and
background mode the runner resumes after the last applied sequence number; otherwise it asks the
upstream (GET /responses/{id}) how the response ended, and stores `unknown` when nobody can tell.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from .. import services
from ..models import RawJSON, ResponseRequest, Segment, ToolCall
from ..streaming.assembler import Assembler, AssemblerStats
from ..streaming.coalescer import Coalescer
from ..streaming.pipeline import StreamPipeline
from ..tools import ToolError, parse_arguments, run_tool
from ..upstream import Upstream, UpstreamHTTPError
from .hub import Hub
from .redact import needs_redaction, redact_event

logger = logging.getLogger(__name__)
Status = ResponseRequest.Status

_BOUNDARY_EVENTS = frozenset({
    "response.content_part.done", "response.output_item.done", "response.reasoning_summary_part.done",
    "response.completed", "response.failed", "response.incomplete", "error",
})
_TEXT_EVENTS = frozenset({"response.output_text.delta", "response.refusal.delta"})
_NOT_TOOL_ITEMS = frozenset({"message", "reasoning"})
MAX_RESUMES = 5
MAX_HTTP_RETRIES = 3
MAX_TOOL_ROUNDS = 5
LOG_BACKLOG_BYTES = 256 * 1024  # raw events waiting for the database before the runner waits too
LOG_FLUSH_BYTES = 32 * 1024  # raw events held in memory before they go to the writer on their own


_db_executor: ThreadPoolExecutor | None = None


_writer_executor: ThreadPoolExecutor | None = None


def db_writer(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`db`, on one thread of its own, for the checkpoint writer: its rounds are the process's
    largest statements, and each thread's allocator keeps the peak it reached (glibc arenas).
    One thread keeps one such peak, where the shared pool would grow one in every thread."""
    global _writer_executor
    if connection.vendor == "sqlite":
        return db(fn)
    if _writer_executor is None:
        _writer_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relay-writer")
    return sync_to_async(_reconnecting(fn), thread_sensitive=False, executor=_writer_executor)


def _reconnecting(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (InterfaceError, OperationalError):
            # A kept connection went away (database restart, idle timeout): reconnect once.
            # The writes here are conditional updates or inserts that replays tolerate (events
            # are deduplicated by sequence number); a tool claim that did commit stays claimed.
            connection.close()
            return fn(*args, **kwargs)

    return call


def db(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a database call off the event loop. Runner writes use their own small thread pool,
    each thread keeping its connection (CONN_MAX_AGE), so one slow commit never queues every
    stream behind it. SQLite takes one writer at a time anyway: there, one shared thread."""
    global _db_executor
    if connection.vendor == "sqlite":
        return sync_to_async(fn, thread_sensitive=True)
    if _db_executor is None:
        _db_executor = ThreadPoolExecutor(max_workers=settings.RELAY_DB_THREADS, thread_name_prefix="relay-db")
    return sync_to_async(_reconnecting(fn), thread_sensitive=False, executor=_db_executor)


def close_db_threads() -> None:
    """Close every runner database thread's connection and stop the threads (tests, shutdown)."""
    global _db_executor, _writer_executor
    pools = [(_db_executor, settings.RELAY_DB_THREADS), (_writer_executor, 1)]
    _db_executor = _writer_executor = None
    for executor, workers in pools:
        if executor is None:
            continue
        barrier = threading.Barrier(workers)

        def close(barrier: threading.Barrier = barrier) -> None:
            barrier.wait(timeout=10)  # every worker takes one: each closes its own connection
            connection.close()

        for future in [executor.submit(close) for _ in range(workers)]:
            future.result()
        executor.shutdown(wait=True)


class StreamRunner:
    def __init__(self, request_id: str, hub: Hub, upstream_factory: Callable[[], Upstream] | None = None) -> None:
        self.request_id = request_id
        self.uuid = uuid.UUID(request_id)
        self.hub = hub
        self._upstream_factory = upstream_factory
        self.token = uuid.uuid4()
        self.pipeline = StreamPipeline(max_event_bytes=settings.RELAY_MAX_EVENT_BYTES,
                                       hold_window=settings.RELAY_HOLD_WINDOW)
        self.assembler = self.pipeline.assembler
        self.view = self.assembler.view
        self.base_interval = settings.RELAY_FLUSH_INTERVAL_MS / 1000
        self.checkpoint_interval = settings.RELAY_CHECKPOINT_INTERVAL_MS / 1000
        self.checkpoint_max_interval = max(settings.RELAY_CHECKPOINT_MAX_INTERVAL_MS / 1000, self.checkpoint_interval)
        self.checkpoint_min_events = settings.RELAY_CHECKPOINT_MIN_EVENTS
        self.coalescer = Coalescer(self.base_interval)
        self.redact_fields = frozenset(settings.RELAY_REDACT_FIELDS)
        self.cancel_requested = asyncio.Event()
        self.finished = asyncio.Event()
        self.status: str = Status.STREAMING
        self._loop = asyncio.get_running_loop()
        self._last_flush = -1e9
        self._last_change = -1e9
        self._timer: asyncio.TimerHandle | None = None
        self._checkpoint_timer: asyncio.TimerHandle | None = None
        self._last_checkpoint = self._loop.time()
        self._captured_revision = -1
        self._last_write: asyncio.Future[None] | None = None
        self._unwritten = 0  # bytes of raw events handed to the writer and not yet committed
        self._log = bytearray()  # raw events since the last commit, as SSE text
        self._log_count = 0
        self._events_since_checkpoint = 0
        self._interval_checkpoints = 0
        self._log_first: int | None = None
        self._log_last: int | None = None
        self._segment_index = 0
        self._segment_events = 0
        self._response_id_saved: str | None = None
        self._seen_text = False
        self._seen_tool = False
        self._last_bytes = self._loop.time()
        self._reader: asyncio.Task[str] | None = None
        self._stalled = False
        self._error: tuple[str, str] | None = None
        self._counters = {"retries": 0, "disconnects": 0}
        self._round = 0  # tool rounds: each continuation is a new upstream response
        self._finished_stats: list[AssemblerStats] = []
        self._usage_total: dict[str, int] = {}
        self._malformed_before = 0
        self.writes = 0  # database writes this runner made (the benchmark reads it)

    @property
    def interval(self) -> float:
        """The flush interval: the setting, stretched by the hub's pacer while the process is busy."""
        return self.base_interval * self.hub.pacer.scale

    # --- lifecycle ----------------------------------------------------------------------------

    async def run(self) -> None:
        if not await db(services.request_acquire_lease)(request_id=self.uuid, token=self.token):
            return  # single-flight: someone else runs it, or it already ended
        self.writes += 1
        request = await db(ResponseRequest.objects.get)(pk=self.uuid)
        self.request = request
        # One upstream client per process (pooled connections); a test may bring its own.
        upstream = self._upstream_factory() if self._upstream_factory else self.hub.upstream()
        self.hub.leases.add(self)  # renewed, with everyone else's, by the hub's lease keeper
        self.hub.pacer.start()
        try:
            segments = await db(lambda: request.segments.count())()
            if request.response_id or segments:
                status = await self._recover(upstream, request)
            else:
                status = await self._drive(upstream, request)
            await self._finish(status)
        except asyncio.CancelledError:
            raise  # process shutdown: the lease runs out and recovery takes over
        except Exception as exc:
            logger.exception("runner for %s failed", self.request_id)
            await self._finish(Status.UNKNOWN if self.assembler.response_id else Status.ERROR,
                               error=("relay_error", str(exc)))
        finally:
            self.hub.leases.discard(self)
            for timer in (self._timer, self._checkpoint_timer):
                if timer is not None:
                    timer.cancel()
            if self._upstream_factory:
                await upstream.aclose()
            else:
                await self.hub.release_upstream(self)
            self.finished.set()

    def cancel(self) -> None:
        """The explicit Stop: stop reading now, then cancel upstream."""
        self.cancel_requested.set()
        if self._reader is not None:
            self._reader.cancel()

    async def _recover(self, upstream: Upstream, request: ResponseRequest) -> str:
        """Take over a request whose runner died: rebuild from the event log, never re-POST."""
        batches = await db(lambda: list(
            request.event_batches.order_by("id").values_list("segment_index", "data")))()
        kinds = await db(lambda: list(request.segments.order_by("index").values_list("kind", flat=True)))()
        self._segment_index = len(kinds)
        for segment_index, data in batches:
            # Each continuation after tool results is a new upstream response in the same view.
            round_ = kinds[: segment_index + 1].count(Segment.Kind.CONTINUATION)
            if round_ != self._round:
                self._next_response(round_)
            self.pipeline.feed(data.encode())
        self.view.take_ops()
        latest = await db(lambda: request.checkpoints.order_by("-revision").values_list(
            "revision", flat=True).first())()
        # Revisions only grow, so tabs holding the old runner's revision resync instead of stalling.
        self.view.revision = max(self.view.revision, latest or 0) + 1
        self.view.take_ops()
        self._response_id_saved = self.assembler.response_id = request.response_id or self.assembler.response_id
        self._counters["retries"] += 1
        if self.assembler.terminal:
            return await self._drive(upstream, request, kind="after_terminal")
        if not self.assembler.response_id:
            return Status.UNKNOWN  # a POST may have reached the upstream: do not send it again
        if (request.params or {}).get("background"):
            return await self._drive(upstream, request, kind=Segment.Kind.RESUME)
        return await self._reconcile(upstream)

    async def _drive(self, upstream: Upstream, request: ResponseRequest, kind: str = Segment.Kind.INITIAL) -> str:
        params = request.params or {}
        background = bool(params.get("background"))
        resumes = http_retries = 0
        body = build_body(request)
        while True:
            if self.cancel_requested.is_set():
                return await self._cancel_upstream(upstream)
            if kind == "after_terminal":  # recovered a finished response: only the tool step is left
                outcome = "terminal"
            else:
                if kind in (Segment.Kind.INITIAL, Segment.Kind.CONTINUATION):
                    ctx: AbstractAsyncContextManager[httpx.Response] = upstream.create_stream(body)
                    starting_after = None
                else:
                    starting_after = self.assembler.last_sequence_number
                    ctx = upstream.resume_stream(self.assembler.response_id or "", starting_after)
                outcome = await self._segment(kind, ctx, starting_after)

            if self.assembler.terminal:
                outputs = await self._run_tools() if self.assembler.status == Status.COMPLETED else []
                if not outputs or self._round >= MAX_TOOL_ROUNDS or self.cancel_requested.is_set():
                    return self.assembler.status or Status.UNKNOWN
                body = continuation_body(request, self.assembler.response_id or "", outputs)
                self._next_response(self._round + 1)
                kind, resumes, http_retries = Segment.Kind.CONTINUATION, 0, 0
                continue
            if outcome == "cancelled" or self.cancel_requested.is_set():
                return await self._cancel_upstream(upstream)
            if outcome.startswith("http_"):
                error = self._http_error
                fresh = kind in (Segment.Kind.INITIAL, Segment.Kind.CONTINUATION)
                if fresh and error.retryable and http_retries < MAX_HTTP_RETRIES:
                    http_retries += 1
                    self._counters["retries"] += 1
                    await asyncio.sleep(min(error.retry_after or 0.5 * 2 ** http_retries, 10))
                    continue
                if fresh:
                    self._error = (error.code or f"http_{error.status}", error.message)
                    return Status.ERROR
            else:
                self._counters["disconnects"] += 1
            # The stream ended without a terminal event: resume, reconcile, or admit we do not know.
            if not self.assembler.response_id:
                return Status.UNKNOWN
            if background and resumes < MAX_RESUMES and outcome != "http_404":
                resumes += 1
                self._counters["retries"] += 1
                self.pipeline.decoder = type(self.pipeline.decoder)(max_event_bytes=settings.RELAY_MAX_EVENT_BYTES)
                await asyncio.sleep(min(0.05 * 2 ** resumes, 2))
                kind = Segment.Kind.RESUME
                continue
            return await self._reconcile(upstream)

    async def _segment(self, kind: str, ctx: AbstractAsyncContextManager[httpx.Response],
                       starting_after: int | None) -> str:
        segment = await db(services.segment_start)(
            request_id=self.uuid, index=self._segment_index, kind=kind, starting_after=starting_after,
            response_id=self.assembler.response_id or "")
        self.writes += 1
        self._segment_index += 1
        self._segment_events = 0
        http_status = None
        detail = ""
        self._reader = self._loop.create_task(self._read(ctx))
        try:
            outcome = await self._reader
        except asyncio.CancelledError:
            if self.cancel_requested.is_set():
                outcome = "cancelled"
            elif self._stalled:
                outcome, detail = "stalled", f"no bytes for {settings.RELAY_IDLE_TIMEOUT_S}s"
                self._stalled = False
            else:
                raise
        except UpstreamHTTPError as exc:
            self._http_error = exc
            outcome, http_status, detail = f"http_{exc.status}", exc.status, exc.message
        except (httpx.HTTPError, OSError) as exc:
            outcome, detail = "dropped", f"{type(exc).__name__}: {exc}"
        finally:
            self._reader = None
        if self.assembler.terminal:
            outcome = self.assembler.status or outcome
        self._after_chunk(force=True)
        await db(services.segment_end)(segment_id=segment.pk, outcome=outcome, events=self._segment_events,
                                       response_id=self.assembler.response_id or "", http_status=http_status,
                                       detail=detail)
        self.writes += 1
        return outcome

    async def _read(self, ctx: AbstractAsyncContextManager[httpx.Response]) -> str:
        async with ctx as response:
            feed = self.pipeline.feed
            async for chunk in response.aiter_bytes():
                self._last_bytes = self._loop.time()
                events = feed(chunk)
                if events:
                    await self._on_events(events)
                    del events  # not held (with every string in it) while the stream is quiet
                if self.assembler.terminal:
                    return "terminal"
        # Events completed after an oversized one come out of the next decode; an unterminated
        # last event is dropped, per spec.
        events = feed(b"")
        if events:
            await self._on_events(events)
        # The upstream closed without a terminal event: never success.
        return "terminal" if self.assembler.terminal else "dropped"

    async def _on_events(self, events: list[dict[str, Any]]) -> None:
        self._segment_events += len(events)
        boundary = mark_text = mark_tool = False
        log = self._log  # a bytearray, grown in place; nothing awaits inside this loop
        fields = self.redact_fields
        for event in events:
            event_type = event["type"]
            if needs_redaction(event_type):
                event = redact_event(event, fields)
            log += b"data: "
            log += orjson.dumps(event)
            log += b"\n\n"
            if event_type in _BOUNDARY_EVENTS:
                boundary = True
            if not self._seen_text and event_type in _TEXT_EVENTS:
                self._seen_text = mark_text = True
            if not self._seen_tool and _is_tool_event(event):
                self._seen_tool = mark_tool = True
        self._log_count += len(events)
        self._events_since_checkpoint += len(events)
        first, last = events[0].get("sequence_number"), events[-1].get("sequence_number")
        if self._log_first is None and type(first) is int:
            self._log_first = first
        if type(last) is int:
            self._log_last = last
        self._after_chunk(boundary=boundary)
        response_id = self.assembler.response_id
        if response_id and response_id != self._response_id_saved:
            # Stored the moment response.created arrives: a crash after this can be reconciled.
            self._response_id_saved = response_id
            await db(services.request_set_response_id)(request_id=self.uuid, response_id=response_id,
                                                       at=timezone.now())
            self.writes += 2
        if mark_text:
            await self._mark_first("first_text_at")
        if mark_tool:
            await self._mark_first("first_tool_at")
        if len(self._log) >= LOG_FLUSH_BYTES:  # a fast stream: bound what it holds in memory
            self._checkpoint("interval", state=False)
        if self._backlog_bytes() > LOG_BACKLOG_BYTES:
            # The database is behind: wait for it rather than buffer without bound or lose the
            # log. The upstream waits in the socket meanwhile; viewers already have their patches.
            self._checkpoint("interval")
            await self._drain_checkpoints()

    def _backlog_bytes(self) -> int:
        return len(self._log) + self._unwritten

    async def _mark_first(self, field: str) -> None:
        await db(services.request_mark_first)(request_id=self.uuid, field=field, at=timezone.now())
        self.writes += 1

    # --- patches and checkpoints --------------------------------------------------------------

    def _after_chunk(self, *, boundary: bool = False, force: bool = False) -> None:
        base, ops = self.view.take_ops()
        now = self._loop.time()
        urgent = False
        if ops:
            urgent = self.coalescer.push(base, ops, self.view.revision, now)
        # Leading edge: a change after a quiet interval (since the last flush, or since the last
        # change) goes out at once; a steady flow goes out at most about once per interval.
        quiet = now - self._last_flush >= self.interval or now - self._last_change >= self.interval
        if ops:
            self._last_change = now
        if urgent or boundary or force or quiet:
            self._flush(now, checkpoint="boundary" if boundary or force else None)
        elif self._timer is None and ops:
            self._timer = self._loop.call_at(self._last_flush + self.interval, self._on_timer)

    def snapshot(self) -> dict[str, Any]:
        """The live view, consistent with the patch stream: pending changes are sent first, so
        the next patch a viewer gets continues exactly from this revision."""
        base, ops = self.view.take_ops()
        now = self._loop.time()
        if ops:
            self.coalescer.push(base, ops, self.view.revision, now)
        self._flush(now)
        return self.view.to_dict()

    def _on_timer(self) -> None:
        self._timer = None
        self._flush(self._loop.time())

    def _flush(self, now: float, checkpoint: str | None = None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        patch = self.coalescer.flush()
        if patch is not None:
            self._last_flush = now
            message = {"type": "patch", **patch}
            self.hub.publish(self.request_id, message, orjson.dumps(message).decode())
        # Checkpoints are captured right after a flush, so every committed revision is a patch
        # boundary: a viewer starting from a checkpoint can chain the patches that follow it.
        if checkpoint is None and self._checkpoint_due(now):
            checkpoint = "interval"
        if checkpoint is not None:
            self._checkpoint(checkpoint)
        elif self._checkpoint_timer is None and (self._log or self.view.revision != self._captured_revision):
            # The stream may go quiet now: commit what it sent within about an interval anyway.
            self._arm_checkpoint_timer(now)

    def _checkpoint_due(self, now: float) -> bool:
        """An interval checkpoint, while text flows: no sooner than RELAY_CHECKPOINT_INTERVAL_MS
        after the last one, and then once RELAY_CHECKPOINT_MIN_EVENTS events have come, the stream
        has gone quiet (no change for an interval), or RELAY_CHECKPOINT_MAX_INTERVAL_MS has passed;
        the first one as soon as the interval allows. A fast answer is committed every 500 ms, a
        slow one every 64 events or 2 s: a 2,000-delta answer costs a few dozen writes at 30
        deltas/s as at 200."""
        elapsed = now - self._last_checkpoint
        if elapsed < self.checkpoint_interval:
            return False
        return (not self._interval_checkpoints  # the first text a reload shows: committed early
                or self._events_since_checkpoint >= self.checkpoint_min_events
                or elapsed >= self.checkpoint_max_interval or now - self._last_change >= self.checkpoint_interval)

    def _on_checkpoint_timer(self) -> None:
        self._checkpoint_timer = None
        now = self._loop.time()
        if self._checkpoint_due(now):
            self._flush(now, checkpoint="interval")
            return
        self._flush(now)  # still flowing: the flow takes the checkpoint when due, or the next timer

    def _arm_checkpoint_timer(self, now: float) -> None:
        """At the earliest moment `_checkpoint_due` could turn true without another event."""
        if self._checkpoint_timer is not None:
            self._checkpoint_timer.cancel()
        at = self._last_checkpoint + self.checkpoint_interval
        if at <= now:
            at = max(min(self._last_change + self.checkpoint_interval,
                         self._last_checkpoint + self.checkpoint_max_interval), now + self.interval)
        self._checkpoint_timer = self._loop.call_at(at, self._on_checkpoint_timer)

    def _checkpoint(self, reason: str, *, state: bool = True) -> None:
        """Capture the state now (or, with state=False, only hand over the raw events); the
        process's checkpoint writer commits it (newest state wins)."""
        revision = self.view.revision
        batch = self._take_log()
        captured = None
        if state and self._checkpoint_timer is not None:
            self._checkpoint_timer.cancel()
            self._checkpoint_timer = None
        if state and revision != self._captured_revision:
            self._captured_revision = revision
            snapshot = self.assembler.response()  # first: it joins each text once for both
            captured = {
                "revision": revision, "sequence_number": self.assembler.last_sequence_number, "reason": reason,
                "view": RawJSON(orjson.dumps(self.view.to_dict())), "snapshot": RawJSON(orjson.dumps(snapshot)),
            }
        elif batch is None:
            return
        if state:
            self._last_checkpoint = self._loop.time()
            self._events_since_checkpoint = 0
            self._interval_checkpoints += reason == "interval"
        size = len(batch["data"]) if batch else 0
        self._unwritten += size
        written = self.hub.writer.submit(self.uuid, captured, batch)
        self._last_write = written
        self.writes += (1 if captured else 0) + (1 if batch else 0)

        def settled(future: asyncio.Future[None]) -> None:
            self._unwritten -= size
            if not future.cancelled() and future.exception() is not None:
                logger.error("checkpoint of %s not written: %s", self.request_id, future.exception())

        written.add_done_callback(settled)

    async def _drain_checkpoints(self) -> None:
        """Wait until everything captured so far is committed (rounds commit in order)."""
        if self._last_write is not None:
            try:
                await asyncio.shield(self._last_write)
            except Exception:  # logged by the callback; the terminal write still goes ahead
                pass

    def _take_log(self) -> dict[str, Any] | None:
        if not self._log:
            return None
        # Bytes until the database thread decodes them: compact, whatever the text's characters.
        batch = {"segment_index": max(self._segment_index - 1, 0), "first_sequence": self._log_first,
                 "last_sequence": self._log_last, "count": self._log_count, "data": bytes(self._log)}
        self._log = bytearray()
        self._log_count = 0
        self._log_first = self._log_last = None
        return batch

    # --- tools -------------------------------------------------------------------------------

    def _next_response(self, round_: int) -> None:
        """A continuation is a new upstream response drawn into the same view, blocks prefixed."""
        self._finished_stats.append(self.assembler.stats)
        self._malformed_before += self.pipeline.malformed + self.pipeline.oversized
        self._add_usage(self.view.meta.get("usage"))
        self._round = round_
        self.assembler = Assembler(hold_window=settings.RELAY_HOLD_WINDOW, view=self.view,
                                   block_prefix=f"r{round_}-")
        self.pipeline = StreamPipeline(max_event_bytes=settings.RELAY_MAX_EVENT_BYTES, assembler=self.assembler)

    async def _run_tools(self) -> list[dict[str, Any]]:
        """Run each completed function call once per call id; outputs for the continuation."""
        calls = [item for item in self.assembler.response().get("output", [])
                 if item.get("type") == "function_call" and item.get("call_id")]
        if not calls:
            return []
        self.view.set_meta({"status": "waiting_for_tool"})
        self._after_chunk(boundary=True)
        outputs = []
        for call in calls:
            call_id, name, arguments = call["call_id"], call.get("name", ""), call.get("arguments") or ""
            block_id = self.assembler.block_id_for(call.get("id"))
            claim = await db(services.tool_call_claim)(request_id=self.uuid, call_id=call_id, name=name,
                                                        arguments=_json_or_text(arguments))
            self.writes += 1
            if claim is None:  # it ran before (replay, recovery): reuse its output, never run it again
                output = await db(lambda cid=call_id: ToolCall.objects.filter(call_id=cid).values_list(
                    "output", flat=True).first())() or ""
            else:
                if block_id:
                    self.view.set(block_id, {"state": "running"})
                    self._after_chunk(boundary=True)
                try:
                    output = await sync_to_async(run_tool, thread_sensitive=False)(
                        name, parse_arguments(name, arguments))
                    ok = True
                except ToolError as exc:
                    output, ok = orjson.dumps({"error": str(exc)}).decode(), False
                await db(services.tool_call_finish)(call_id=call_id, output=output, ok=ok)
                self.writes += 1
            if block_id:
                self.view.set(block_id, {"state": "done", "output": output})
            outputs.append({"type": "function_call_output", "call_id": call_id, "output": output})
        self.view.set_meta({"status": "in_progress"})
        self._after_chunk(boundary=True)
        return outputs

    def _add_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key in ("input_tokens", "output_tokens", "total_tokens"):
            if isinstance(usage.get(key), int):
                self._usage_total[key] = self._usage_total.get(key, 0) + usage[key]

    # --- endings ------------------------------------------------------------------------------

    async def _cancel_upstream(self, upstream: Upstream) -> str:
        if self.assembler.response_id and (self.request.params or {}).get("background"):
            try:
                final = await upstream.cancel(self.assembler.response_id)
            except (httpx.HTTPError, OSError):
                final = None
            if final and final.get("status") in ("completed", "failed", "incomplete"):
                self._apply_final(final)  # it ended before the cancel landed: keep the truth
                return self.assembler.status or Status.CANCELLED
        return Status.CANCELLED

    async def _reconcile(self, upstream: Upstream) -> str:
        """Ask the upstream how the response ended; `unknown` when it cannot say."""
        response_id = self.assembler.response_id or ""
        segment = await db(services.segment_start)(request_id=self.uuid, index=self._segment_index,
                                                   kind=Segment.Kind.RECONCILE, response_id=response_id)
        self._segment_index += 1
        outcome = "unknown"
        try:
            final = await upstream.retrieve(response_id)
        except (UpstreamHTTPError, httpx.HTTPError, OSError) as exc:
            final = None
            outcome = f"unreachable: {exc}"[:32]
        if final and final.get("status") in ("completed", "failed", "incomplete", "cancelled"):
            self._apply_final(final)
            outcome = self.assembler.status or "unknown"
        await db(services.segment_end)(segment_id=segment.pk, outcome=outcome, events=0, response_id=response_id)
        self.writes += 2
        return self.assembler.status if self.assembler.terminal else Status.UNKNOWN  # type: ignore[return-value]

    def _apply_final(self, response: dict[str, Any]) -> None:
        kind = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(
            response.get("status", ""), "response.failed")
        self.assembler.release_held()
        self.assembler.feed({"type": kind, "response": response})

    async def _finish(self, status: str, error: tuple[str, str] | None = None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        error = error or self._error
        if status in (Status.CANCELLED, Status.UNKNOWN, Status.ERROR) and not self.assembler.terminal:
            fields: dict[str, Any] = {"status": status}
            if error:
                fields["error"] = {"code": error[0], "message": error[1]}
            self.view.set_meta(fields)
        base, ops = self.view.take_ops()
        if ops:
            self.coalescer.push(base, ops, self.view.revision, self._loop.time())
        self._flush(self._loop.time(), checkpoint="terminal")
        await self._drain_checkpoints()
        assembler_error = self.assembler.error or {}
        meta = self.view.meta
        final_error = meta.get("error") or {}
        all_stats = [*self._finished_stats, self.assembler.stats]
        counters = {
            "events": sum(s.events for s in all_stats), "duplicates": sum(s.duplicates for s in all_stats),
            "out_of_order": sum(s.held for s in all_stats), "gaps": sum(s.gaps for s in all_stats),
            "unknown_events": sum(s.unknown for s in all_stats),
            "malformed_events": self._malformed_before + self.pipeline.malformed + self.pipeline.oversized,
            "last_sequence_number": self.assembler.last_sequence_number,
        }
        await db(services.request_mark_terminal)(
            request_id=self.uuid, token=self.token, status=status, at=timezone.now(),
            error_code=(error[0] if error else "") or str(final_error.get("code") or assembler_error.get("code") or ""),
            error_message=(error[1] if error else "") or str(final_error.get("message")
                                                           or assembler_error.get("message") or ""),
            incomplete_reason=str(meta.get("incomplete_reason") or ""),
            usage=self._total_usage(meta.get("usage")),
            final_text=self.final_text(),
            counters=counters,
            response_id=self.assembler.response_id or "",
        )
        await db(services.request_count)(request_id=self.uuid, **{k: v for k, v in self._counters.items() if v})
        self.writes += 2
        self.status = status
        message = {"type": "terminal", "status": status, "revision": self.view.revision,
                   "error": {"code": error[0], "message": error[1]} if error else final_error or None}
        self.hub.publish(self.request_id, message, orjson.dumps(message).decode())

    def _total_usage(self, last: Any) -> Any:
        if not self._usage_total:
            return last  # one response: its terminal usage, exactly as the upstream reported it
        self._add_usage(last)
        return dict(self._usage_total)

    def final_text(self) -> str:
        view = self.view
        return "\n\n".join(view.text(b["id"]) for b in view.to_dict()["blocks"] if b["kind"] == "text")

    def check_idle(self, now: float) -> None:
        """Called by the hub's lease keeper: an upstream silent for too long counts as dropped."""
        idle_limit = settings.RELAY_IDLE_TIMEOUT_S
        if now - self._last_bytes > idle_limit and self._reader is not None:
            logger.warning("upstream silent for %ss on %s; treating as dropped", idle_limit, self.request_id)
            self._stalled = True
            self._reader.cancel()  # surfaces as a drop: resume or reconcile


def _is_tool_event(event: dict[str, Any]) -> bool:
    event_type = event["type"]
    if event_type == "response.output_item.added":
        item = event.get("item")
        return isinstance(item, dict) and item.get("type") not in _NOT_TOOL_ITEMS
    return "_call" in event_type


def continuation_body(request: ResponseRequest, previous_response_id: str,
                      outputs: list[dict[str, Any]]) -> dict[str, Any]:
    body = build_body(request)
    body["previous_response_id"] = previous_response_id
    body["input"] = outputs
    return body


def _json_or_text(arguments: str) -> Any:
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments


def build_body(request: ResponseRequest) -> dict[str, Any]:
    params = request.params or {}
    body: dict[str, Any] = {"model": request.model, "input": request.input, "store": True}
    for key in ("background", "metadata", "previous_response_id", "instructions", "max_output_tokens", "tools"):
        if params.get(key) not in (None, "", {}, []):
            body[key] = params[key]
    return body

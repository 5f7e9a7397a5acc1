"""How a request ends: the runner's endings, a base of `StreamRunner` (runner.py).

Cancelling the response upstream (it may have ended first: its own status then), asking the
upstream how a response whose stream broke off ended (`unknown` when it cannot say), and writing
the request's outcome once: every window judged, the outcome concluded from why the relay stopped
it (`steps.conclude`), the terminal checkpoint and every safety verdict committed before the
request is marked ended, then the `terminal` message to every viewer. `_stop` is where the relay
stops a request itself: the gravest reason stands (outcomes.Stopped).

The state is the runner's (declared here, held in its slots); this class only groups what ends it.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from typing import Any
from uuid import UUID

import httpx
import orjson
from django.utils import timezone

from .. import search, services
from ..models import Segment
from ..ops import tracing
from ..selectors import RunRequest
from ..streaming import vocabulary as v
from ..streaming.transcript import Transcript
from ..streaming.view import ViewModel
from ..upstream.credentials import masked
from ..upstream.http import Upstream, UpstreamHTTPError
from .dbthreads import db
from .delivery import Delivery
from .flag import Flag
from .gate_checks import SafetyChecks
from .outcomes import Ending, Stopped
from .steps import conclude

Kind = Segment.Kind
logger = logging.getLogger(__name__)
LOST_CODE = "upstream_connection_lost"
RECONCILE_WAIT_S = 60.0  # how long a reconcile waits for a response the provider still runs
_RUNNING = frozenset({"queued", "in_progress"})


def lost_with_connection(final: dict[str, Any]) -> dict[str, Any]:
    """The provider's `cancelled` for a response the relay never cancelled: its connection was
    lost and the response with it. It ends `failed`, naming the lost connection (never `cancelled`,
    which is a Stop), keeping the output the provider has."""
    message = ("The connection to the model provider was lost mid-answer and the provider ended the "
               "response with it. What arrived is shown; Regenerate to ask again.")
    return dict(final, status=v.FAILED, error={"code": LOST_CODE, "message": message})


class Endings:
    # The runner's state this part reads and writes (the runner's __init__ sets it).
    __slots__ = ("uuid", "token", "request", "status", "transcript", "view", "delivery", "safety", "span",
                 "stopped", "cancel_requested", "_error", "_counters", "_segment_index", "_own_writes", "_marks")
    uuid: UUID
    token: UUID
    request: RunRequest
    status: str
    transcript: Transcript
    view: ViewModel
    delivery: Delivery
    safety: SafetyChecks | None
    span: tracing.RequestSpan
    stopped: Stopped | None
    cancel_requested: Flag
    _error: tuple[str, str] | None
    _counters: dict[str, int]
    _segment_index: int
    _own_writes: int
    _marks: set[asyncio.Task[None]]

    def cancel(self) -> None:
        """Stop reading now, then cancel the upstream (the runner's, which knows its reader)."""
        raise NotImplementedError

    async def _end_after_crash(self, exc: Exception) -> None:
        """The runner's loop raised: the request ends `error` (`unknown` once the provider had it),
        or, when not even that can be written, `_crashed`."""
        try:
            await self._finish(v.UNKNOWN if self.transcript.response_id else v.ERROR,
                               error=("relay_error", masked(str(exc))), stopped=None)
        except Exception:
            logger.exception("request %s: its runner failed and could not end it", self.uuid)
            await self._crashed(exc)

    async def _crashed(self, exc: BaseException | None) -> None:
        """The runner crashed and could not end the request (`exc`), or its runners kept dying
        (None). Past services.MAX_TAKEOVERS the request ends `failed` with the reason, shown to
        every viewer; before, its lease ends now and the next sweep takes it over."""
        reason = (f"{type(exc).__name__}: {masked(str(exc), 300)}" if exc is not None
                  else "its runners stopped without ending it, again and again")
        message = f"The relay could not carry this request to its end ({reason})."
        try:
            ended = await db(services.request_crashed)(request_id=self.uuid, token=self.token, reason=message,
                                                       at=timezone.now())
        except Exception:  # the database is away: the lease runs out, and a sweep tries again
            logger.exception("request %s: its runner crashed (%s) and could not say so", self.uuid, reason)
            return
        if not ended:
            logger.error("request %s: its runner crashed (%s); a sweep takes it over", self.uuid, reason)
            return
        logger.error("request %s ended failed (%s) after %d takeovers: %s", self.uuid, services.RELAY_CRASHED,
                     services.MAX_TAKEOVERS, reason)
        self.status = v.FAILED
        message_ = {"type": "terminal", "status": v.FAILED, "revision": self.view.revision,
                    "error": {"code": services.RELAY_CRASHED, "message": masked(message)}}
        self.delivery.publish(message_, orjson.dumps(message_).decode())

    def count_write(self, n: int = 1) -> None:
        self._own_writes += n

    def _stop(self, ending: Ending, error: tuple[str, str] | None = None, *, cancel: bool = True) -> None:
        """The relay stops the request itself (the gravest reason stands) and, unless told not to,
        stops reading and cancels the upstream."""
        stop = Stopped(ending, error)
        if stop.graver_than(self.stopped):
            self.stopped = stop
        if cancel:
            self.cancel()

    async def _settle(self) -> bool:
        """Every window judged; True when the safety policy stopped the request."""
        if self.safety is not None:
            await self.safety.settle()
        return self.stopped is not None and self.stopped.ending is Ending.FILTERED

    async def _cancel_upstream(self, upstream: Upstream) -> str:
        # Stop already closed the stream; a provider that has no cancel is not asked (it stops
        # generating when its stream closes, or cannot be stopped at all).
        if self.transcript.response_id and (self.request.params or {}).get("background") and upstream.can_cancel:
            try:
                final = await upstream.cancel(self.transcript.response_id)
            except (httpx.HTTPError, OSError):
                final = None
            if final and final.get("status") in (v.COMPLETED, v.FAILED, v.INCOMPLETE):
                self.delivery.changed(self.transcript.apply_final(final), boundary=True)  # it ended first
                return self.transcript.status or v.CANCELLED
            if final and isinstance(final.get("usage"), dict):  # what the stopped response was billed
                self.delivery.changed(self.transcript.reported_usage(final["usage"]), boundary=True)
        return v.CANCELLED

    async def _reconcile(self, upstream: Upstream) -> str:
        """Ask the upstream how the response ended; `unknown` when it cannot say."""
        response_id = self.transcript.response_id or ""
        segment = await db(services.segment_start)(request_id=self.uuid, index=self._segment_index,
                                                   kind=Kind.RECONCILE, response_id=response_id)
        self._segment_index += 1
        outcome = v.UNKNOWN
        why = ""
        try:
            if not upstream.can_retrieve:
                final = None
                why = "this provider keeps no responses to ask about (it cannot retrieve one)"
            else:
                final = await self._retrieve_settled(upstream, response_id)
        except UpstreamHTTPError as exc:
            final = None
            outcome = masked(f"unreachable: {exc}", 32)
            why = ("it no longer knows this response (HTTP 404)" if exc.status == 404
                   else f"it answered HTTP {exc.status} when asked")
        except (httpx.HTTPError, OSError) as exc:
            final = None
            outcome = masked(f"unreachable: {exc}", 32)
            why = f"it could not be reached ({type(exc).__name__})"
        if final and final.get("status") == v.CANCELLED and not (self.request.params or {}).get("background"):
            # Nobody pressed Stop: a foreground response ends with the connection that carried it.
            final = lost_with_connection(final)
            self._error = (LOST_CODE, final["error"]["message"])
        if final and final.get("status") in v.RESPONSE_FINAL_STATUSES:
            self.delivery.changed(self.transcript.apply_final(final), boundary=True)
            outcome = self.transcript.status or v.UNKNOWN
        elif final:
            status = str(final.get("status") or "unfinished")[:40]
            why = f"it reports the response as {status}, which cannot be streamed again"
        await db(services.segment_end)(segment_id=segment.pk, outcome=outcome, events=0, response_id=response_id)
        self.count_write(2)
        if self.transcript.terminal:
            return self.transcript.status or v.UNKNOWN
        if self.cancel_requested.is_set():  # Stop (or the deadline) while it still ran
            return await self._cancel_upstream(upstream)
        self._error = ("outcome_unknown", "The stream from the model provider broke off before the response ended, "
                       f"and the provider cannot say how it ended: {why or 'no answer'}. What arrived is shown; "
                       "it may be cut short.")
        return v.UNKNOWN

    async def _retrieve_settled(self, upstream: Upstream, response_id: str) -> dict[str, Any]:
        """The response as the provider has it, asked again while it is still running (it can
        finish without us: a background response, or a provider that keeps one after its
        connection dropped), for at most RECONCILE_WAIT_S; a Stop or the deadline ends the wait."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + RECONCILE_WAIT_S
        delay = 0.5
        while True:
            final = await upstream.retrieve(response_id)
            if final.get("status") not in _RUNNING or self.cancel_requested.is_set() or loop.time() >= give_up:
                return final
            with suppress(TimeoutError):
                await asyncio.wait_for(self.cancel_requested.wait(), min(delay, max(give_up - loop.time(), 0)))
            delay = min(delay * 2, 4.0)

    async def _finish(self, status: str, error: tuple[str, str] | None = None, *, stopped: Stopped | None) -> None:
        """End the request (`stopped`: why the relay stopped it, as the loop ended; None if it raised)."""
        # Text held for a check is judged (and shown) before the end; a flag here stops it too.
        if self.safety is not None:
            await self._settle()
        end = conclude(status, error or self._error, stopped=stopped, settled=self.stopped)
        status, error = end.status, end.error
        self.delivery.changed(self.transcript.end(status, error, reason=end.reason, over_response=end.over_response))
        await self.delivery.final()
        if self.safety is not None:
            await self.safety.drain()  # every verdict stored before the request is marked ended
            if self._marks:
                await asyncio.gather(*self._marks, return_exceptions=True)
        transcript = self.transcript
        # Behind a safety gate, only the error viewers were shown (the view's meta) is stored.
        assembler_error = (transcript.assembler.error or {}) if transcript.gate is None else {}
        meta = self.view.meta
        final_error = meta.get("error") or {}
        await db(services.request_mark_terminal)(
            request_id=self.uuid, token=self.token, status=status, at=timezone.now(),
            error_code=(error[0] if error else "") or str(final_error.get("code") or assembler_error.get("code") or ""),
            error_message=(error[1] if error else "") or str(final_error.get("message")
                                                           or assembler_error.get("message") or ""),
            incomplete_reason=str(meta.get("incomplete_reason") or ""),
            usage=transcript.usage(),
            final_text=transcript.final_text(),
            tool_text=search.tool_document(self.view.block(block_id) for block_id in self.view.order()),
            counters=transcript.counters(),
            response_id=transcript.response_id or "",
        )
        self.span.end(status=status, response_id=transcript.response_id or "", usage=transcript.usage(),
                      error_code=(error[0] if error else "") or str(final_error.get("code") or ""))
        await db(services.request_count)(request_id=self.uuid, **{k: n for k, n in self._counters.items() if n})
        self.count_write(2)
        self.status = status
        message = {"type": "terminal", "status": status, "revision": self.view.revision,
                   "error": {"code": error[0], "message": error[1]} if error else final_error or None}
        self.delivery.publish(message, orjson.dumps(message).decode())

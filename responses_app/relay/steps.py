"""What the runner does next, and how a request ends: decided from values, in one place.

After every upstream segment (and once after a takeover rebuilt the view from the event log),
`next_step` says what the runner's loop does: run the response's tools, resume the stream after
its last applied sequence number, POST again, send the whole conversation once, ask the upstream
how the response ended, cancel it, or finish with a status and an error. `conclude` turns the
status the loop ended with and why the relay stopped the request itself (`Stopped`) into the
request's outcome. The runner performs what these say and decides nothing itself.

Pure: no I/O, no clock, no Django.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..streaming import vocabulary as v
from .outcomes import Ending, SegmentResult, Stopped, describe_http_error, describe_http_status

MAX_RESUMES = 5
MAX_HTTP_RETRIES = 3

# Segment kinds (models.Segment.Kind's values).
INITIAL, RESUME = "initial", "resume"


class Action(enum.Enum):
    TOOL_ROUND = "tool_round"  # the response ended: run its tools, and continue if they answered
    RESUME = "resume"  # stream the response again after its last applied sequence number
    RETRY = "retry"  # POST the same body again
    FULL_CONTEXT = "full_context"  # the chain is gone: POST once more with the whole conversation
    RECONCILE = "reconcile"  # ask the upstream how the response ended
    CANCEL = "cancel"  # cancel the response upstream (if it can be) and end as that says
    FINISH = "finish"  # end with `status` (and `error`)


@dataclass(frozen=True, slots=True)
class Situation:
    """What the loop knows after a segment."""

    result: SegmentResult
    kind: str = INITIAL  # the segment's kind
    cancelled: bool = False  # Stop was pressed, or the relay stopped the request itself
    flagged: bool = False  # the safety policy stopped the request (every verdict is in)
    terminal: bool = False  # the current response is in a terminal state
    response_id: bool = False  # the upstream confirmed the response: its id is known
    background: bool = False  # a background response: it can be streamed again
    chained: bool = False  # the body continues a previous response (`previous_response_id`)
    resumes: int = 0  # resumes so far in this loop
    http_retries: int = 0  # POSTs retried so far in this loop
    refused: int = 0  # after a takeover: POSTs so far, when the upstream refused every one (429)


@dataclass(frozen=True, slots=True)
class Next:
    action: Action
    status: str = ""  # FINISH: the request's status
    error: tuple[str, str] | None = None  # FINISH: its error (code, message)
    delay: float = 0.0  # RETRY, RESUME: seconds to wait first
    disconnected: bool = False  # the connection was lost (counted as a disconnect)


def next_step(now: Situation) -> Next:
    result = now.result
    if result.ending is Ending.RESTORED:
        return _after_takeover(now)
    if now.flagged:  # what the stream said is judged before anything acts on it
        return Next(Action.FINISH, v.CANCELLED) if now.terminal else Next(Action.CANCEL)
    if now.terminal:
        return Next(Action.TOOL_ROUND)
    if result.ending is Ending.CANCELLED or now.cancelled:
        return Next(Action.CANCEL)
    fresh = now.kind != RESUME
    if result.http is not None and fresh:
        error = result.http
        if error.code == "previous_response_not_found" and now.chained and now.kind == INITIAL:
            # The chain is gone (a provider forgot the response, or a restart of the embedded
            # simulator): once, the whole conversation as input, as the error guide advises.
            return Next(Action.FULL_CONTEXT)
        if error.retryable and now.http_retries < MAX_HTTP_RETRIES:
            return Next(Action.RETRY, delay=min(error.retry_after or 0.5 * 2 ** (now.http_retries + 1), 10))
        return Next(Action.FINISH, v.ERROR, describe_http_error(error))
    if result.never_sent and fresh:  # certain: the request never left, so nothing can have happened
        return Next(Action.FINISH, v.ERROR, (result.code or "upstream_unreachable", result.detail))
    disconnected = result.http is None
    # The stream ended without a terminal event: resume, reconcile, or admit we do not know.
    if not now.response_id:
        return Next(Action.FINISH, v.UNKNOWN, (
            "outcome_unknown", "The connection to the model provider was lost before it confirmed the request "
            f"({result.detail or result.ending.value}); it may have run."), disconnected=disconnected)
    if now.background and now.resumes < MAX_RESUMES and result.http_status != 404:
        return Next(Action.RESUME, delay=min(0.05 * 2 ** (now.resumes + 1), 2), disconnected=disconnected)
    return Next(Action.RECONCILE, disconnected=disconnected)


def _after_takeover(now: Situation) -> Next:
    if now.terminal:  # it ended; only the tool step may be left
        return Next(Action.TOOL_ROUND)
    if not now.response_id and now.refused:  # nothing was accepted: sending again bills nothing twice
        if now.refused > MAX_HTTP_RETRIES:
            return Next(Action.FINISH, v.ERROR, describe_http_status(429))
        return Next(Action.RETRY, delay=min(0.5 * 2 ** now.refused, 10))
    if not now.response_id:  # a POST may have reached the upstream: it is not sent again
        return Next(Action.FINISH, v.UNKNOWN, (
            "outcome_unknown", "The relay restarted before the model provider confirmed the request; it may "
            "have run, so it is not sent again."))
    return Next(Action.RESUME) if now.background else Next(Action.RECONCILE)


@dataclass(frozen=True, slots=True)
class Conclusion:
    status: str
    error: tuple[str, str] | None
    reason: str | None  # the incomplete reason the relay gives (None: the response's own, if any)
    over_response: bool  # the request went on past a settled response: its status is the relay's


# Stops after which the request's status is the relay's even over a response that settled.
_OVER = frozenset({Ending.STOPPED_WAITING, Ending.OVER_LIMIT, Ending.OVER_SIZE, Ending.FILTERED,
                   Ending.WRITE_FAILED})


def conclude(status: str, error: tuple[str, str] | None, *, stopped: Stopped | None,
             settled: Stopped | None) -> Conclusion:
    """The request's outcome. `status`, `error`: what the loop ended with; `stopped`: why the
    relay stopped the request when the loop ended (None when the loop raised); `settled`: the
    same once the last safety verdicts are in (a flag then stops what has no reason yet)."""
    reason = None
    ending = stopped.ending if stopped is not None else None
    if stopped is not None and ending is Ending.WRITE_FAILED:
        status, error = v.ERROR, stopped.error
    elif ending is Ending.FILTERED or ending is Ending.OVER_LIMIT or ending is Ending.OVER_SIZE:
        status, reason = v.INCOMPLETE, ending.value
    elif ending is Ending.DEADLINE and status == v.CANCELLED:
        status, reason = v.INCOMPLETE, ending.value
    late = settled.ending if settled is not None else None
    if late is Ending.FILTERED and reason is None and status != v.ERROR:
        status, reason = v.INCOMPLETE, late.value
    # A deadline ends a settled response's request `cancelled`, and so `deadline`, only while an
    # approval was awaited: the status is the relay's then too.
    over = late in _OVER or reason == Ending.DEADLINE.value
    return Conclusion(status, error, reason, over)

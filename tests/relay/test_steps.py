"""The runner's decisions as tables: what the loop does after a segment (`next_step`), and how a
request ends given why the relay stopped it (`conclude`). Pure: no database, no sockets."""

from __future__ import annotations

from typing import Any

import pytest

from responses_app.relay.outcomes import Ending, SegmentResult, Stopped
from responses_app.relay.steps import MAX_HTTP_RETRIES, MAX_RESUMES, Action, Situation, conclude, next_step
from responses_app.upstream.http import UpstreamHTTPError


def http(status: int, code: str = "", retry_after: float | None = None) -> SegmentResult:
    body = b'{"error": {"code": "%s", "message": "no"}}' % code.encode()
    return SegmentResult(Ending.HTTP_ERROR, "no", UpstreamHTTPError(status, body, retry_after))


TERMINAL = SegmentResult(Ending.TERMINAL)
DROPPED = SegmentResult(Ending.DROPPED, "ReadError: reset")
STALLED = SegmentResult(Ending.STALLED, "no bytes for 30s")
CANCELLED = SegmentResult(Ending.CANCELLED)
REFUSED = SegmentResult(Ending.DROPPED, "refused", never_sent=True, code="upstream_refused")
RESTORED = SegmentResult(Ending.RESTORED)

# (name, the situation, the action, and what else the step says)
NEXT: list[tuple[str, Situation, Action, dict[str, Any]]] = [
    ("a response that ended goes to its tool step", Situation(TERMINAL, terminal=True, response_id=True),
     Action.TOOL_ROUND, {}),
    ("a flag after the response ended finishes it cancelled",
     Situation(TERMINAL, terminal=True, flagged=True), Action.FINISH, {"status": "cancelled"}),
    ("a flag mid-stream cancels the upstream", Situation(DROPPED, flagged=True, response_id=True),
     Action.CANCEL, {}),
    ("the flag is judged before the tool step", Situation(TERMINAL, terminal=True, flagged=True, cancelled=True),
     Action.FINISH, {"status": "cancelled"}),
    ("Stop cancels", Situation(CANCELLED, response_id=True), Action.CANCEL, {}),
    ("Stop pressed as the stream dropped cancels", Situation(DROPPED, cancelled=True, response_id=True),
     Action.CANCEL, {}),
    ("the response ended before Stop: its tool step decides", Situation(TERMINAL, terminal=True, cancelled=True),
     Action.TOOL_ROUND, {}),
    ("a lost chain is sent once with the whole conversation",
     Situation(http(400, "previous_response_not_found"), chained=True), Action.FULL_CONTEXT, {}),
    ("a lost chain in a full-context segment is an error",
     Situation(http(400, "previous_response_not_found"), kind="full_context", chained=True),
     Action.FINISH, {"status": "error"}),
    ("a 429 is retried after its Retry-After", Situation(http(429, retry_after=3)), Action.RETRY, {"delay": 3}),
    ("a 503 is retried with backoff", Situation(http(503), http_retries=1), Action.RETRY, {"delay": 2.0}),
    ("the backoff is capped at ten seconds", Situation(http(503, retry_after=60), http_retries=2),
     Action.RETRY, {"delay": 10}),
    ("retries run out", Situation(http(503), http_retries=MAX_HTTP_RETRIES), Action.FINISH,
     {"status": "error", "error": ("upstream_unavailable",
                                   "The model provider is unavailable (HTTP 503): no")}),
    ("a 401 is an error at once", Situation(http(401)), Action.FINISH,
     {"status": "error", "error": ("upstream_unauthorized",
                                   "The model provider refused the server's API key (HTTP 401): no")}),
    ("a request that never left is an error, certainly", Situation(REFUSED), Action.FINISH,
     {"status": "error", "error": ("upstream_refused", "refused")}),
    ("a drop before the response was confirmed is unknown", Situation(DROPPED, background=True),
     Action.FINISH, {"status": "unknown", "disconnected": True}),
    ("a background response is resumed", Situation(DROPPED, response_id=True, background=True),
     Action.RESUME, {"delay": 0.1, "disconnected": True}),
    ("a stall is resumed like a drop", Situation(STALLED, response_id=True, background=True, resumes=2),
     Action.RESUME, {"delay": 0.4, "disconnected": True}),
    ("resumes run out: reconcile", Situation(DROPPED, response_id=True, background=True, resumes=MAX_RESUMES),
     Action.RECONCILE, {"disconnected": True}),
    ("a resume the upstream no longer knows: reconcile",
     Situation(http(404), kind="resume", response_id=True, background=True), Action.RECONCILE,
     {"disconnected": False}),
    ("a resume refused otherwise is resumed again",
     Situation(http(500), kind="resume", response_id=True, background=True), Action.RESUME, {}),
    ("a foreground response cannot be resumed: reconcile", Situation(DROPPED, response_id=True),
     Action.RECONCILE, {"disconnected": True}),
    ("a takeover after the response ended: its tool step", Situation(RESTORED, terminal=True, response_id=True),
     Action.TOOL_ROUND, {}),
    ("a takeover before the upstream confirmed: unknown, never sent again", Situation(RESTORED, background=True),
     Action.FINISH, {"status": "unknown"}),
    ("a takeover of a background response resumes it", Situation(RESTORED, response_id=True, background=True),
     Action.RESUME, {"delay": 0.0}),
    ("a takeover of a foreground response reconciles", Situation(RESTORED, response_id=True), Action.RECONCILE, {}),
]


@pytest.mark.parametrize(("situation", "action", "fields"), [row[1:] for row in NEXT], ids=[row[0] for row in NEXT])
def test_next_step(situation: Situation, action: Action, fields: dict[str, Any]) -> None:
    step = next_step(situation)
    assert step.action is action
    for name, value in fields.items():
        assert getattr(step, name) == value, name
    if action is Action.FINISH and situation.result.ending is not Ending.TERMINAL and step.status != "cancelled":
        assert step.error is not None, "a request the relay ends without a response says why"


def stop(ending: Ending, error: tuple[str, str] | None = None) -> Stopped:
    return Stopped(ending, error)


WRITES = ("checkpoint_failed", "could not store")
# (name, the loop's status, why it was stopped then, once settled, and the outcome:
#  status, error code, incomplete reason, status over a settled response)
CONCLUDE: list[tuple[str, str, Stopped | None, Stopped | None, tuple[str, str | None, str | None, bool]]] = [
    ("nothing stopped it: the loop's status", "completed", None, None, ("completed", None, None, False)),
    ("failed writes end it in error", "cancelled", stop(Ending.WRITE_FAILED, WRITES), stop(Ending.WRITE_FAILED, WRITES),
     ("error", "checkpoint_failed", None, True)),
    ("a flag ends it incomplete", "cancelled", stop(Ending.FILTERED), stop(Ending.FILTERED),
     ("incomplete", None, "content_filter", True)),
    ("too many items end it incomplete", "completed", stop(Ending.OVER_LIMIT), stop(Ending.OVER_LIMIT),
     ("incomplete", None, "max_output_items", True)),
    ("the deadline ends a cancelled loop incomplete", "cancelled", stop(Ending.DEADLINE), stop(Ending.DEADLINE),
     ("incomplete", None, "deadline", True)),
    ("a response that ended before the deadline keeps its status", "completed", stop(Ending.DEADLINE),
     stop(Ending.DEADLINE), ("completed", None, None, False)),
    ("Stop while an approval waited is the relay's cancel", "cancelled", stop(Ending.STOPPED_WAITING),
     stop(Ending.STOPPED_WAITING), ("cancelled", None, None, True)),
    ("a flag in the last verdicts stops what had no reason", "completed", None, stop(Ending.FILTERED),
     ("incomplete", None, "content_filter", True)),
    ("... but not an error", "error", None, stop(Ending.FILTERED), ("error", None, None, True)),
    ("... nor what the deadline had stopped", "cancelled", stop(Ending.DEADLINE), stop(Ending.FILTERED),
     ("incomplete", None, "deadline", True)),
    ("a loop that raised keeps its status", "unknown", None, stop(Ending.DEADLINE), ("unknown", None, None, False)),
    ("a stall is not a reason to end", "unknown", stop(Ending.STALLED), stop(Ending.STALLED),
     ("unknown", None, None, False)),
]


@pytest.mark.parametrize(("status", "stopped", "settled", "outcome"), [row[1:] for row in CONCLUDE],
                         ids=[row[0] for row in CONCLUDE])
def test_conclude(status: str, stopped: Stopped | None, settled: Stopped | None,
                  outcome: tuple[str, str | None, str | None, bool]) -> None:
    end = conclude(status, None, stopped=stopped, settled=settled)
    assert (end.status, end.error[0] if end.error else None, end.reason, end.over_response) == outcome


def test_the_gravest_reason_to_stop_stands() -> None:
    order = [Ending.STALLED, Ending.STOPPED_WAITING, Ending.DEADLINE, Ending.OVER_LIMIT, Ending.FILTERED,
             Ending.WRITE_FAILED, Ending.ABANDONED]
    for lower, higher in zip(order, order[1:], strict=False):
        assert Stopped(higher).graver_than(Stopped(lower)) and not Stopped(lower).graver_than(Stopped(higher))
    assert not Stopped(Ending.DEADLINE).graver_than(Stopped(Ending.DEADLINE)), "the first of equals stands"
    with pytest.raises(ValueError):
        Stopped(Ending.DROPPED)

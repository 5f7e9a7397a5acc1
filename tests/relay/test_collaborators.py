"""The runner's collaborators on their own: the event log and the patch stream."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from responses_app.metrics import ARRIVED
from responses_app.relay import eventlog
from responses_app.relay.eventlog import EventLog
from responses_app.relay.outcomes import Ending, SegmentResult
from responses_app.relay.patches import PatchStream
from responses_app.streaming.replay import replay_bytes
from responses_app.streaming.transcript import Ops
from responses_app.streaming.view import ViewModel
from responses_app.upstream import UpstreamHTTPError

# --- event log ------------------------------------------------------------------------------------


def test_the_event_log_batches_redacted_sse_with_its_sequence_range() -> None:
    log = EventLog(frozenset({"arguments"}))
    log.segment_index = 2
    log.add([
        {"type": "response.created", "sequence_number": 0, "response": {"id": "r", "status": "in_progress"}},
        {"type": "response.function_call_arguments.delta", "sequence_number": 1, "item_id": "f",
         "output_index": 0, "delta": '{"secret'},
    ])
    log.add([{"type": "response.output_text.delta", "sequence_number": 2, "delta": "hi"}])
    batch = log.take()
    assert batch is not None
    assert (batch["segment_index"], batch["first_sequence"], batch["last_sequence"], batch["count"]) == (2, 0, 2, 3)
    events = [orjson.loads(line[len(b"data: "):]) for line in batch["data"].split(b"\n\n") if line]
    assert events[1]["delta"] == "[redacted]" and events[2]["delta"] == "hi"
    assert log.take() is None and len(log) == 0


def test_the_event_log_says_when_it_is_full(monkeypatch: Any) -> None:
    monkeypatch.setattr(eventlog, "LOG_FLUSH_BYTES", 100)
    log = EventLog(frozenset())
    log.add([{"type": "response.output_text.delta", "delta": "x" * 20}])
    assert not log.full
    log.add([{"type": "response.output_text.delta", "delta": "x" * 80}])
    assert log.full


def test_a_logged_batch_replays() -> None:
    log = EventLog(frozenset())
    log.add([{"type": "response.created", "sequence_number": 0, "response": {"id": "r", "status": "in_progress"}},
             {"type": "response.completed", "sequence_number": 1, "response": {"id": "r", "status": "completed"}}])
    batch = log.take()
    assert batch is not None and replay_bytes(batch["data"]).status == "completed"


# --- patch stream -----------------------------------------------------------------------------------


class Sent(list[dict[str, Any]]):
    def __call__(self, message: dict[str, Any], text: str) -> None:
        assert orjson.loads(text) == {k: v for k, v in message.items() if k != ARRIVED}  # the stamp stays here
        self.append(message)


def change(view: ViewModel) -> Ops:
    base, ops = view.take_ops()
    return Ops(base, ops, view.revision)


async def test_a_snapshot_waits_for_the_next_flush_instead_of_publishing() -> None:
    view = ViewModel()
    sent = Sent()
    patches = PatchStream(view, sent, interval=0.05)
    view.add({"id": "b", "kind": "text", "text": "a"})
    patches.push(change(view), now=1.0)
    patches.flush(1.0)
    view.append("b", "b")
    assert not patches.push(change(view), now=1.01), "within the interval: pending"
    reader = asyncio.ensure_future(patches.snapshot())
    await asyncio.sleep(0)
    assert not reader.done() and len(sent) == 1, "reading published nothing"
    patches.flush(1.05)
    snapshot = await reader
    assert snapshot["revision"] == sent[-1]["revision"] == view.revision, "taken at the patch boundary"
    assert snapshot["blocks"][0]["text"] == "ab"


async def test_with_nothing_pending_a_snapshot_is_immediate() -> None:
    view = ViewModel()
    patches = PatchStream(view, Sent(), interval=0.05)
    assert (await patches.snapshot())["revision"] == 0


async def test_closing_answers_whoever_still_waits() -> None:
    view = ViewModel()
    patches = PatchStream(view, Sent(), interval=0.05)
    view.add({"id": "b", "kind": "text"})
    patches.push(change(view), now=1.0)
    patches.flush(1.0)
    view.append("b", "x")
    patches.push(change(view), now=1.01)
    reader = asyncio.ensure_future(patches.snapshot())
    await asyncio.sleep(0)
    patches.close()
    assert (await reader)["revision"] == view.revision


# --- outcomes ---------------------------------------------------------------------------------------


def test_segment_outcomes_read_as_the_audit_shows_them() -> None:
    assert SegmentResult(Ending.TERMINAL).outcome("completed") == "completed"
    assert SegmentResult(Ending.DROPPED).outcome(None) == "dropped"
    error = UpstreamHTTPError(429, b'{"error": {"code": "rate_limit"}}', None)
    http = SegmentResult(Ending.HTTP_ERROR, "busy", error)
    assert http.outcome(None) == "http_429" and http.http_status == 429

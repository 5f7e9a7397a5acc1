"""The runner's collaborators on their own: the event log and the patch stream."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from responses_app.ops.metrics import ARRIVED
from responses_app.relay.eventlog import EventLog
from responses_app.relay.outcomes import Ending, SegmentResult
from responses_app.relay.patches import PatchStream
from responses_app.streaming.replay import replay_bytes
from responses_app.streaming.transcript import Ops
from responses_app.streaming.view import ViewModel
from responses_app.streaming.wire import decode
from responses_app.upstream.http import UpstreamHTTPError
from tests.conftest import relay_check_errors

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


def test_the_event_log_says_how_much_it_holds() -> None:
    """What the delivery weighs against LOG_FLUSH_BYTES and its backlog bound, once per chunk."""
    log = EventLog(frozenset())
    held = log.add([{"type": "response.output_text.delta", "delta": "x" * 20}])
    assert held == len(log) > 20
    assert log.add([]) == held
    assert log.add([{"type": "response.output_text.delta", "delta": "x" * 80}]) == len(log) > held + 80
    log.take()
    assert log.add([]) == 0


def test_the_event_log_keeps_each_payload_as_it_came() -> None:
    """The upstream's own bytes, not a re-encoding; a payload of several data lines, and a
    redacted one, are serialised on one line (the SSE framing needs it) and still replay."""
    from responses_app.streaming.transcript import Transcript

    sse = (b'data: {"type": "response.created",  "sequence_number": 0, "response": {"id": "r", '
           b'"status": "in_progress"}}\n\n'
           b'data: {"type": "response.output_text.delta",\ndata:  "sequence_number": 1, "item_id": "m", '
           b'"output_index": 0, "content_index": 0, "delta": "caf\xc3\xa9"}\n\n'
           b'data: not json\n\n'
           b'data: {"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"f",'
           b'"output_index":1,"delta":"{\\"secret"}\n\n'
           b'data: {"type":"response.completed","sequence_number":3,"response":{"id":"r","status":"completed"}}\n\n')
    step = Transcript().feed(sse)
    assert len(step.events) == len(step.raw) == 4  # the malformed one is in neither
    log = EventLog(frozenset({"arguments"}))
    log.add(step.events, step.raw)
    batch = log.take()
    assert batch is not None
    lines = batch["data"].split(b"\n\n")
    assert lines[0] == sse.split(b"\n\n")[0]  # byte for byte, the odd spacing too
    assert lines[1] == b"data: " + orjson.dumps(step.events[1])  # two data lines: one, re-encoded
    assert b"secret" not in batch["data"] and b"[redacted]" in lines[2]
    assert lines[3] == sse.split(b"\n\n")[4]
    assert len(log) == 0 and len(batch["data"]) == sum(len(line) + 2 for line in lines if line)
    taken = bytes(batch["data"])
    log.add(step.events, step.raw)  # the next batch: the one taken is the log's old buffer, left alone
    assert batch["data"] == taken and log.take() == dict(batch, data=taken)
    replayed = replay_bytes(taken)
    assert replayed.status == "completed" and "café" in orjson.dumps(replayed.response["output"]).decode()


def test_a_logged_batch_replays() -> None:
    log = EventLog(frozenset())
    log.add([{"type": "response.created", "sequence_number": 0, "response": {"id": "r", "status": "in_progress"}},
             {"type": "response.completed", "sequence_number": 1, "response": {"id": "r", "status": "completed"}}])
    batch = log.take()
    assert batch is not None and replay_bytes(bytes(batch["data"])).status == "completed"


# --- patch stream -----------------------------------------------------------------------------------


class Sent(list[dict[str, Any]]):
    def __call__(self, message: dict[str, Any], text: str) -> None:
        frame = decode(text)  # the wire's form of the same patch
        assert (frame["type"], frame["base"], frame["revision"]) == ("patch", message["base"], message["revision"])
        assert ARRIVED not in text  # the patch-lag stamp rides in the message, never on the wire
        self.append(message)


def change(view: ViewModel) -> Ops:
    base, ops = view.take_ops()
    return Ops(base, ops, view.revision)


async def test_a_snapshot_waits_for_the_next_flush_instead_of_publishing() -> None:
    view = ViewModel()
    sent = Sent()
    patches = PatchStream(view, sent, interval=0.05)
    view.add({"id": "b", "kind": "text"})
    view.append("b", "a")
    patches.push(change(view), now=1.0)
    patches.flush(1.0)
    view.append("b", "b")
    assert not patches.push(change(view), now=1.01), "text flowing, within the interval: pending"
    reader = asyncio.ensure_future(patches.snapshot())
    await asyncio.sleep(0)
    assert not reader.done() and len(sent) == 1, "reading published nothing"
    patches.flush(1.05)
    snapshot = await reader
    assert snapshot["revision"] == sent[-1]["revision"] == view.revision, "taken at the patch boundary"
    assert snapshot["blocks"][0]["text"] == "ab"


def test_a_slow_flow_is_published_in_patches_worth_their_envelope() -> None:
    """30 deltas/s of five characters, as the simulator's paced streams send them (one or two
    deltas every 50 ms): with RELAY_FLUSH_MIN_CHARS/MAX_WAIT's defaults a patch carries several
    deltas, and its frames stay within twice the text; flushed every 50 ms they would not."""
    block = "msg_0123456789abcdef0123456789abcdef-c0"

    def frames(**policy: Any) -> list[str]:
        view = ViewModel()
        sent: list[str] = []
        patches = PatchStream(view, lambda message, text: sent.append(text), 0.05, **policy)
        view.add({"id": block, "kind": "text"})
        patches.push(change(view), 0.0, boundary=True)
        patches.flush(0.0)
        now, appended = 0.0, 0
        while appended < 200:
            now += 0.05
            deadline = patches.next_deadline()
            if deadline is not None and deadline <= now:
                patches.flush(deadline)  # the relay's timer
            for _ in range(1 + appended % 2):
                view.append(block, "word ")
                appended += 1
            if patches.push(change(view), now):
                patches.flush(now)
        patches.flush(now)
        assert "".join(decode(t)["ops"][0] for t in sent[1:]) == "word " * appended
        return sent[1:]

    text = 200 * len("word ")
    batched, every_interval = frames(max_wait=0.1, min_chars=32), frames()
    wire = [sum(len(f) + 2 for f in sent) for sent in (batched, every_interval)]  # + a frame header each
    assert wire[0] <= 2 * text < wire[1]
    sizes = [len(decode(f)["ops"][0]) for f in batched]
    assert sizes[0] == 5, "the first text at once"
    assert all(20 <= size <= 45 for size in sizes[1:-1]), sizes


@pytest.mark.parametrize(("name", "value", "message"), [
    ("RELAY_FLUSH_MIN_CHARS", "-1", "must be zero or more"), ("RELAY_FLUSH_MIN_CHARS", "many", "must be an integer"),
    ("RELAY_FLUSH_MAX_WAIT_MS", "0", "must be positive"), ("RELAY_FLUSH_MIN_CHARS", "0", None),
])
def test_the_batching_settings_are_checked(name: str, value: str, message: str | None, settings: Any) -> None:
    setattr(settings, name, value)
    errors = relay_check_errors()
    if message is None:
        assert errors == []  # 0: every interval, as before protocol 2
    else:
        assert [(e.id, message in e.msg) for e in errors] == [("responses_app.E002", True)], errors


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

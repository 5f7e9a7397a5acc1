"""A response's bound of output items: past it the assembler drops what would be added and says so,
and assembling stays linear in the number of items (a hostile upstream costs bounded work)."""

from __future__ import annotations

import gc
import time
from typing import Any

import orjson

from responses_app.streaming.assembler import Assembler
from responses_app.streaming.transcript import Transcript


def message(i: int, text: str = "hi ", status: str = "in_progress") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"id": f"msg_{i}", "type": "message", "status": status, "role": "assistant", "content": content}


def items_stream(n: int, *, final_output: bool = True) -> list[dict[str, Any]]:
    """`n` one-part messages, each added, given one delta and done, then response.completed."""
    seq = iter(range(10**9))
    events: list[dict[str, Any]] = [{"type": "response.created", "sequence_number": next(seq),
                                     "response": {"id": "resp_1", "status": "in_progress", "output": []}}]
    for i in range(n):
        where = {"output_index": i, "item_id": f"msg_{i}", "content_index": 0}
        events += [
            {"type": "response.output_item.added", "sequence_number": next(seq), "output_index": i,
             "item": message(i)},
            {"type": "response.content_part.added", "sequence_number": next(seq), **where,
             "part": {"type": "output_text", "text": "", "annotations": []}},
            {"type": "response.output_text.delta", "sequence_number": next(seq), **where, "delta": "hi "},
            {"type": "response.output_item.done", "sequence_number": next(seq), "output_index": i,
             "item": message(i, status="completed")},
        ]
    output = [message(i, status="completed") for i in range(n)] if final_output else []
    events.append({"type": "response.completed", "sequence_number": next(seq),
                   "response": {"id": "resp_1", "status": "completed", "output": output}})
    return events


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(event) + b"\n\n" for event in events)


def test_items_past_the_bound_are_dropped_and_the_step_says_so_once() -> None:
    transcript = Transcript(max_output_items=5)
    body = sse(items_stream(20))
    steps = [transcript.feed(body[i:i + 700]) for i in range(0, len(body), 700)]
    steps.append(transcript.finish())
    assert sum(step.limited for step in steps) == 1
    assert transcript.limited and transcript.terminal
    assert [b["id"] for b in transcript.view.to_dict()["blocks"]] == [f"o{i}-c0" for i in range(5)]
    response = transcript.snapshot()
    assert [item["id"] for item in response["output"]] == [f"msg_{i}" for i in range(5)]
    assert any("more than 5 output items" in a for a in transcript.assembler.stats.anomalies)


def test_a_terminal_response_cannot_bring_more_items_than_the_bound() -> None:
    # The stream announces two items; the final Response lists a thousand.
    events = items_stream(2)
    events[-1]["response"]["output"] = [message(i, status="completed") for i in range(1000)]
    assembler = Assembler(max_items=10)
    applied = assembler.feed_many(events)
    assert applied.limited and applied.terminal and assembler.status == "completed"
    assert len(assembler.response()["output"]) == 10
    assert len(assembler.view.to_dict()["blocks"]) == 10


def test_parts_count_against_the_bound_too() -> None:
    # One item whose content holds thousands of parts, then parts added one by one.
    events = items_stream(0)[:1]
    many = [{"type": "output_text", "text": "x", "annotations": []}] * 5000
    events.append({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
                   "item": {"id": "msg_0", "type": "message", "role": "assistant", "content": many}})
    events += [{"type": "response.content_part.added", "sequence_number": 2 + i, "output_index": 1,
                "item_id": "msg_1", "content_index": i, "part": {"type": "output_text", "text": ""}}
               for i in range(50)]
    assembler = Assembler(max_items=20)
    assert assembler.feed_many(events).limited
    assert len(assembler.view.to_dict()["blocks"]) <= 20


def test_within_the_bound_nothing_changes() -> None:
    bounded, free = Transcript(max_output_items=40), Transcript(max_output_items=10**6)
    body = sse(items_stream(40))
    assert not bounded.feed(body).limited and not bounded.limited
    free.feed(body)
    assert bounded.view.to_dict() == free.view.to_dict() and bounded.snapshot() == free.snapshot()


def _seconds_per_item(n: int) -> float:
    """CPU per item of assembling `n` items as the relay does: fed chunk by chunk, and the text
    compacted at every boundary (a checkpoint each), then the snapshot and view once."""
    body = sse(items_stream(n))
    chunks = [body[i:i + 4096] for i in range(0, len(body), 4096)]
    best = float("inf")
    gc.collect()
    gc.disable()  # the assembler's own work: a full collection scans the whole suite's heap, whatever n
    try:
        for _ in range(3):
            transcript = Transcript(max_output_items=10**6)
            started = time.process_time()
            for chunk in chunks:
                if transcript.feed(chunk).boundary:
                    transcript.compact()
            transcript.finish()
            transcript.snapshot()
            transcript.view.to_dict()
            best = min(best, time.process_time() - started)
    finally:
        gc.enable()
    return best / n


def test_assembling_stays_linear_in_the_number_of_items() -> None:
    small, large = _seconds_per_item(200), _seconds_per_item(10_000)
    # Linear work gives a ratio near 1; the quadratic compaction this guards against gave over 30.
    assert large / small < 4, f"{large * 1e6:.1f} us per item at 10,000 items, {small * 1e6:.1f} at 200"

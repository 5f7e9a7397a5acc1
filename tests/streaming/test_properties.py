"""Properties of the streaming core over generated streams (hypothesis) and every real capture.

- Transport noise never changes the result: arbitrary chunking, duplicated events and swaps
  within the hold window assemble to the same `response()` and `view.to_dict()`.
- The view's ops are a faithful patch stream: applying every op `take_ops()` returned, with
  `apply_patch`, to an empty view gives exactly `to_dict()`; so do the Coalescer's patches, and
  so do their websocket frames (wire.py), read back with `wire.decode`.

Generated streams are valid Responses API event sequences: several output items (messages with
output_text and refusal parts and annotations, reasoning with summary parts, function calls with
argument deltas), then `response.completed` with the full output, or no terminal at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from responses_app.streaming.assembler import Assembler
from responses_app.streaming.coalescer import Coalescer
from responses_app.streaming.pipeline import StreamPipeline
from responses_app.streaming.policies import FlushPolicy
from responses_app.streaming.view import apply_patch
from responses_app.streaming.wire import decode, encode_patch
from tests.conftest import REAL_STREAMS, real_stream_files, require_real_streams

HOLD_WINDOW = 8
EMPTY_VIEW: dict[str, Any] = {"revision": 0, "meta": {"response_id": None, "status": None},
                              "blocks": []}

# --- a generator of valid streams -----------------------------------------------------------

deltas = st.lists(
    st.text(alphabet=st.sampled_from(list("ab Z.\n\"\\é😀")), max_size=6), min_size=0, max_size=6
)
annotation = st.builds(
    lambda n: {"type": "url_citation", "url": f"https://example.com/{n}", "title": f"t{n}",
               "start_index": 0, "end_index": n},
    st.integers(0, 50),
)
text_part = st.tuples(st.just("output_text"), deltas, st.lists(annotation, max_size=2))
refusal_part = st.tuples(st.just("refusal"), deltas, st.just([]))
message = st.tuples(st.just("message"), st.lists(st.one_of(text_part, refusal_part),
                                                  min_size=1, max_size=3))
reasoning = st.tuples(st.just("reasoning"), st.lists(deltas, max_size=3))
function_call = st.tuples(st.just("function_call"), deltas)
items = st.lists(st.one_of(message, reasoning, function_call), min_size=1, max_size=4)


def build_events(spec: list[Any], terminal: bool) -> list[dict[str, Any]]:
    """The events of a stream producing the output items in `spec`, sequence-numbered."""
    events: list[dict[str, Any]] = []

    def emit(type_: str, **fields: Any) -> None:
        events.append({"type": type_, "sequence_number": len(events), **fields})

    rid = "resp_gen"
    emit("response.created", response={"id": rid, "object": "response", "status": "in_progress",
                                       "model": "gen", "output": []})
    emit("response.in_progress", response={"id": rid, "object": "response",
                                           "status": "in_progress", "model": "gen", "output": []})
    final_items = []
    for oi, item in enumerate(spec):
        kind = item[0]
        if kind == "message":
            iid = f"msg_{oi}"
            base = {"id": iid, "type": "message", "status": "in_progress", "role": "assistant"}
            emit("response.output_item.added", output_index=oi, item=dict(base, content=[]))
            parts = []
            for ci, (ptype, pieces, notes) in enumerate(item[1]):
                where = {"item_id": iid, "output_index": oi, "content_index": ci}
                field = "text" if ptype == "output_text" else "refusal"
                empty: dict[str, Any] = {"type": ptype, field: ""}
                if ptype == "output_text":
                    empty["annotations"] = []
                emit("response.content_part.added", **where, part=empty)
                for piece in pieces:
                    if ptype == "output_text":
                        emit("response.output_text.delta", **where, delta=piece, logprobs=[])
                    else:
                        emit("response.refusal.delta", **where, delta=piece)
                for ai, note in enumerate(notes):
                    emit("response.output_text.annotation.added", **where, annotation_index=ai,
                         annotation=note)
                full = dict(empty, **{field: "".join(pieces)})
                if ptype == "output_text":
                    full["annotations"] = list(notes)
                    emit("response.output_text.done", **where, text=full["text"], logprobs=[])
                else:
                    emit("response.refusal.done", **where, refusal=full["refusal"])
                emit("response.content_part.done", **where, part=full)
                parts.append(full)
            done = dict(base, status="completed", content=parts)
        elif kind == "reasoning":
            iid = f"rs_{oi}"
            base = {"id": iid, "type": "reasoning"}
            emit("response.output_item.added", output_index=oi, item=dict(base, summary=[]))
            summary = []
            for si, pieces in enumerate(item[1]):
                where = {"item_id": iid, "output_index": oi, "summary_index": si}
                emit("response.reasoning_summary_part.added", **where,
                     part={"type": "summary_text", "text": ""})
                for piece in pieces:
                    emit("response.reasoning_summary_text.delta", **where, delta=piece)
                full = {"type": "summary_text", "text": "".join(pieces)}
                emit("response.reasoning_summary_text.done", **where, text=full["text"])
                emit("response.reasoning_summary_part.done", **where, part=full)
                summary.append(full)
            done = dict(base, summary=summary)
        else:
            iid = f"fc_{oi}"
            base = {"id": iid, "type": "function_call", "status": "in_progress",
                    "call_id": f"call_{oi}", "name": "lookup"}
            emit("response.output_item.added", output_index=oi, item=dict(base, arguments=""))
            where = {"item_id": iid, "output_index": oi}
            for piece in item[1]:
                emit("response.function_call_arguments.delta", **where, delta=piece)
            arguments = "".join(item[1])
            emit("response.function_call_arguments.done", **where, arguments=arguments)
            done = dict(base, status="completed", arguments=arguments)
        emit("response.output_item.done", output_index=oi, item=done)
        final_items.append(done)
    if terminal:
        emit("response.completed", response={"id": rid, "object": "response",
                                             "status": "completed", "model": "gen",
                                             "output": final_items,
                                             "usage": {"total_tokens": len(events)}})
    return events


def to_sse(events: list[dict[str, Any]], *, event_lines: bool = True) -> bytes:
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if event_lines else ""
        out.append(f"{head}data: {json.dumps(event, ensure_ascii=False)}\n\n")
    return "".join(out).encode()


streams = st.builds(build_events, items, st.booleans())


# --- running the pipeline -------------------------------------------------------------------


@dataclass
class Run:
    response: dict[str, Any]
    view: dict[str, Any]
    patches: list[dict[str, Any]]  # one per take_ops() call, as the relay drains them
    coalesced: list[dict[str, Any]]  # what a Coalescer made of the same ops
    duplicates: int
    frames: list[bytes]  # the coalesced patches as the websocket carries them


def run(body: bytes, cuts: list[int] | None = None, *, max_pending_ops: int = 2000) -> Run:
    pipeline = StreamPipeline(hold_window=HOLD_WINDOW)
    view = pipeline.assembler.view
    coalescer = Coalescer(max_pending_ops=max_pending_ops)
    policy = FlushPolicy(0.05)
    patches: list[dict[str, Any]] = []
    coalesced: list[dict[str, Any]] = []
    frames: list[bytes] = []
    now = 0.0

    def send(patch: dict[str, Any]) -> None:
        coalesced.append(patch)
        frames.append(encode_patch(patch, view.order()))

    def drain() -> None:
        nonlocal now
        base, ops = view.take_ops()
        if not ops:
            return
        patches.append({"base": base, "revision": view.revision, "ops": ops})
        now += 0.01
        if coalescer.push(base, list(ops), view.revision) or policy.push(now, changed=True):
            send(coalescer.flush())  # type: ignore[arg-type]
            policy.flushed(now, sent=True)

    bounds = sorted({0, len(body), *(cuts or [])})
    for start, end in zip(bounds, bounds[1:], strict=False):
        pipeline.feed(body[start:end])
        drain()
    pipeline.finish()
    drain()
    last = coalescer.flush()
    if last is not None:
        send(last)
    return Run(pipeline.assembler.response(), view.to_dict(), patches, coalesced,
               pipeline.assembler.stats.duplicates, frames)


def replay_patches(patches: list[dict[str, Any]]) -> dict[str, Any]:
    client = json.loads(json.dumps(EMPTY_VIEW))
    for patch in patches:
        assert apply_patch(client, patch), f"patch {patch['base']}->{patch['revision']} rejected"
    return client  # type: ignore[no-any-return]


def perturb(events: list[dict[str, Any]], data: st.DataObject) -> list[dict[str, Any]]:
    """Swap pairs no further apart than the hold window, then duplicate some events later on."""
    order = list(events)
    i = 1  # the first event is never moved: a stream may start anywhere (resume)
    while i < len(order) - 1:
        if data.draw(st.integers(0, 3), label="swap?") == 0:
            j = data.draw(st.integers(i + 1, min(i + HOLD_WINDOW, len(order) - 1)), label="with")
            order[i], order[j] = order[j], order[i]
            i = j + 1  # swaps do not overlap, so no event is displaced by more than the window
        else:
            i += 1
    out: list[dict[str, Any]] = []
    for event in order:
        out.append(event)
        if data.draw(st.integers(0, 5), label="duplicate?") == 0:
            out.append(event)
    return out


def cuts_for(body: bytes, data: st.DataObject) -> list[int]:
    return data.draw(st.lists(st.integers(0, len(body)), max_size=30), label="cuts")


PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- generated streams ----------------------------------------------------------------------


@PROPERTY
@given(events=streams, data=st.data())
def test_chunking_duplication_and_reordering_never_change_the_result(
    events: list[dict[str, Any]], data: st.DataObject
) -> None:
    reference = run(to_sse(events))
    noisy = perturb(events, data)
    body = to_sse(noisy, event_lines=data.draw(st.booleans(), label="event lines"))
    result = run(body, cuts_for(body, data))
    assert result.response == reference.response
    assert result.view == reference.view
    assert result.duplicates == len(noisy) - len(events)


@PROPERTY
@given(events=streams, data=st.data())
def test_patches_rebuild_the_view(events: list[dict[str, Any]], data: st.DataObject) -> None:
    body = to_sse(events)
    result = run(body, cuts_for(body, data),
                 max_pending_ops=data.draw(st.integers(1, 50), label="max pending"))
    assert replay_patches(result.patches) == result.view
    assert replay_patches(result.coalesced) == result.view
    assert replay_patches([decode(frame) for frame in result.frames]) == result.view


@PROPERTY
@given(events=streams)
def test_generated_streams_assemble_to_their_final_output(events: list[dict[str, Any]]) -> None:
    result = run(to_sse(events))
    dones = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert result.response["output"] == dones
    terminal = events[-1]["type"] == "response.completed"
    assert result.view["meta"]["status"] == ("completed" if terminal else "in_progress")


@PROPERTY
@given(events=streams, data=st.data())
def test_feed_many_is_feed_one_by_one(events: list[dict[str, Any]], data: st.DataObject) -> None:
    """The batched fast path (`feed_many`) is exactly `feed` applied to each event."""
    noisy = perturb(events, data)
    if data.draw(st.booleans(), label="legacy"):
        noisy = [{k: v for k, v in e.items() if k != "sequence_number"} for e in noisy]
    one, many = Assembler(hold_window=HOLD_WINDOW), Assembler(hold_window=HOLD_WINDOW)
    for event in json.loads(json.dumps(noisy)):
        one.feed(event)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(noisy)), max_size=8), label="batches")))
    copies = json.loads(json.dumps(noisy))
    for start, end in zip([0, *cuts], [*cuts, len(noisy)], strict=True):
        many.feed_many(copies[start:end])
        if data.draw(st.booleans(), label="read between batches"):
            many.response()
            many.view.to_dict()
    assert many.response() == one.response()
    assert many.view.to_dict() == one.view.to_dict()
    assert many.view.take_ops() == one.view.take_ops()
    assert many.stats == one.stats
    assert (many.last_sequence_number, many._next_seq) == (one.last_sequence_number, one._next_seq)


# --- real captures --------------------------------------------------------------------------

FILES = real_stream_files() or [REAL_STREAMS / "absent.sse"]


@pytest.mark.parametrize("capture", FILES, ids=[p.name for p in FILES])
def test_patches_rebuild_the_view_for_real_captures(capture: Path) -> None:
    require_real_streams()
    body = capture.read_bytes()
    for cuts in (None, list(range(0, len(body), 997))):
        result = run(body, cuts)
        assert replay_patches(result.patches) == result.view
        assert replay_patches(result.coalesced) == result.view
        assert replay_patches([decode(frame) for frame in result.frames]) == result.view
    small = run(body, list(range(0, len(body), 4096)), max_pending_ops=3)
    assert replay_patches(small.coalesced) == small.view == result.view

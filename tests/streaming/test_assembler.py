"""Behaviour of the Assembler, one rule per test (the contract is in assembler.py's docstring)."""

from __future__ import annotations

from typing import Any

import pytest

from responses_app import native
from responses_app.streaming import items
from responses_app.streaming.assembler import Assembler
from responses_app.streaming.view import ViewModel, apply_op

RID = "resp_1"
MSG = "msg_1"
WHERE = {"item_id": MSG, "output_index": 0, "content_index": 0}


def response(status: str = "in_progress", **fields: Any) -> dict[str, Any]:
    return {"id": RID, "object": "response", "status": status, "model": "m", **fields}


def ev(type_: str, seq: int | None, **fields: Any) -> dict[str, Any]:
    event = {"type": type_, **fields}
    if seq is not None:
        event["sequence_number"] = seq
    return event


def head(seq: bool = True) -> list[dict[str, Any]]:
    """created, in_progress, a message item and its first part: sequence numbers 0..3."""
    n = iter(range(4)) if seq else iter([None] * 4)
    return [
        ev("response.created", next(n), response=response()),
        ev("response.in_progress", next(n), response=response()),
        ev("response.output_item.added", next(n), output_index=0,
           item={"id": MSG, "type": "message", "status": "in_progress", "role": "assistant",
                 "content": []}),
        ev("response.content_part.added", next(n), **WHERE,
           part={"type": "output_text", "text": "", "annotations": []}),
    ]


def delta(seq: int | None, text: str, **where: Any) -> dict[str, Any]:
    return ev("response.output_text.delta", seq, **(where or WHERE), delta=text, logprobs=[])


def message(text: str) -> dict[str, Any]:
    return {"id": MSG, "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def feed(assembler: Assembler, events: list[dict[str, Any]]) -> Assembler:
    for event in events:
        assembler.feed(event)
    return assembler


def text_of(assembler: Assembler, output_index: int = 0, part: int = 0) -> str:
    return assembler.response()["output"][output_index]["content"][part]["text"]  # type: ignore[no-any-return]


def block(assembler: Assembler, block_id: str) -> dict[str, Any]:
    return next(b for b in assembler.view.to_dict()["blocks"] if b["id"] == block_id)


def replayed(view: ViewModel) -> dict[str, Any]:
    """The ops taken so far, applied to an empty client view."""
    client: dict[str, Any] = {"revision": 0, "meta": {"response_id": None, "status": None},
                              "blocks": []}
    _, ops = view.take_ops()
    for op in ops:
        apply_op(client, op)
    client["revision"] = view.revision
    return client


# --- sequencing -----------------------------------------------------------------------------


def test_swapped_pair_applies_in_order() -> None:
    a = feed(Assembler(), [*head(), delta(5, "world"), delta(4, "hello ")])
    assert text_of(a) == "hello world"
    assert block(a, "o0-c0")["text"] == "hello world"
    assert (a.stats.held, a.stats.gaps, a.stats.duplicates) == (1, 0, 0)
    assert a.held_count == 0 and a.last_sequence_number == 5


def test_gap_is_recorded_after_hold_window() -> None:
    a = feed(Assembler(hold_window=2), [*head(), delta(5, "b"), delta(6, "c")])
    assert a.held_count == 2 and text_of(a) == ""  # still waiting for 4
    a.feed(delta(7, "d"))  # a third held event: past the window, the gap is given up
    assert (a.stats.gaps, a.stats.held, a.held_count) == (1, 3, 0)
    assert text_of(a) == "bcd"
    a.feed(delta(4, "a"))  # too late: it counts as a duplicate, the view does not jump back
    assert a.stats.duplicates == 1 and text_of(a) == "bcd"
    a.feed(delta(8, "e"))
    assert text_of(a) == "bcde"


def test_release_held_gives_up_on_open_gaps() -> None:
    a = feed(Assembler(), [*head(), delta(6, "c"), delta(9, "f")])
    a.release_held()
    assert (a.stats.gaps, a.held_count) == (2, 0)
    assert text_of(a) == "cf"


def test_duplicate_is_counted_and_ignored() -> None:
    events = [*head(), delta(4, "a"), delta(5, "b")]
    a = feed(Assembler(), [e for e in events for _ in range(2)])
    assert text_of(a) == "ab"
    assert a.stats.duplicates == len(events)
    assert a.stats.events == len(events)
    # a duplicate of a held event is not held twice
    b = feed(Assembler(), [*head(), delta(6, "c"), delta(6, "c"), delta(5, "b"), delta(4, "a")])
    assert (b.stats.held, b.stats.duplicates) == (2, 1) and text_of(b) == "abc"


def test_resume_without_created() -> None:
    # A resume (`starting_after=3`) starts at whatever comes next: no response.created.
    a = Assembler(starting_after=3)
    feed(a, [ev("response.in_progress", 4, response=response()),
             ev("response.output_item.added", 5, output_index=0,
                item={"id": MSG, "type": "message", "status": "in_progress", "content": []}),
             ev("response.content_part.added", 6, **WHERE, part={"type": "output_text",
                                                                  "text": ""}),
             delta(7, "resumed")])
    assert a.stats.duplicates == 0 and a.response_id == RID and a.status == "in_progress"
    assert text_of(a) == "resumed"
    # Events at or before starting_after are the overlap: ignored.
    a.feed(delta(3, "old"))
    assert a.stats.duplicates == 1
    # Without starting_after, the first sequence number seen is where the stream starts.
    b = feed(Assembler(), [ev("response.queued", 10, response=response("queued")),
                           ev("response.in_progress", 11, response=response())])
    assert b.status == "in_progress" and b.last_sequence_number == 11
    assert b.view.meta["response_id"] == RID


def test_legacy_stream_without_sequence_numbers() -> None:
    events = [*head(seq=False), delta(None, "no "), delta(None, "numbers"),
              head(seq=False)[2],  # a repeated item.added changes nothing
              ev("response.output_text.done", None, **WHERE, text="no numbers"),
              ev("response.completed", None, response=response("completed",
                                                               output=[message("no numbers")]))]
    a = feed(Assembler(), events)
    assert a.status == "completed" and a.terminal
    assert a.response()["output"] == [message("no numbers")]
    assert a.last_sequence_number is None
    assert a.stats.events == len(events) and a.stats.anomalies == []


# --- terminal events and final values -------------------------------------------------------


def test_terminal_without_output_keeps_deltas() -> None:
    a = feed(Assembler(), [*head(), delta(4, "kept"),
                           ev("response.completed", 5, response=response("completed"))])
    assert a.status == "completed"
    assert text_of(a) == "kept" and block(a, "o0-c0")["text"] == "kept"
    # ... and with an empty output list as well
    b = feed(Assembler(), [*head(), delta(4, "kept"),
                           ev("response.completed", 5, response=response("completed", output=[]))])
    assert text_of(b) == "kept"


def test_terminal_output_is_authoritative() -> None:
    a = feed(Assembler(), [*head(), delta(4, "draft"),
                           ev("response.completed", 5,
                              response=response("completed", output=[message("final")]))])
    assert a.response()["output"] == [message("final")]
    assert block(a, "o0-c0")["text"] == "final" and block(a, "o0-c0")["state"] == "done"


def test_done_fixes_lost_deltas() -> None:
    # seq 5 ("lo") is lost for good; output_text.done carries the final text.
    a = feed(Assembler(hold_window=1), [*head(), delta(4, "Hel"), delta(6, " wor"),
                                        delta(7, "ld"),
                                        ev("response.output_text.done", 8, **WHERE,
                                           text="Hello world")])
    assert a.stats.gaps == 1
    assert text_of(a) == "Hello world"
    view_block = block(a, "o0-c0")
    assert view_block["text"] == "Hello world" and view_block["state"] == "done"
    assert replayed(a.view) == a.view.to_dict()


def test_deltas_after_done_append_to_the_fixed_text() -> None:
    a = feed(Assembler(), [*head(), delta(4, "ab"),
                           ev("response.output_text.done", 5, **WHERE, text="abc"),
                           delta(6, "d")])
    assert text_of(a) == "abcd" and block(a, "o0-c0")["text"] == "abcd"
    assert replayed(a.view) == a.view.to_dict()


def test_unknown_event_counted_not_raised() -> None:
    a = feed(Assembler(), [*head(), ev("response.brand_new.thing", 4, payload=1),
                           ev("response.brand_new.thing", 5), delta(6, "still works")])
    assert a.stats.unknown == 2
    assert a.stats.unknown_types == {"response.brand_new.thing": 2}
    assert text_of(a) == "still works"


def test_error_event_then_no_terminal_is_error_status() -> None:
    a = feed(Assembler(), [*head(), delta(4, "partial"),
                           ev("error", 5, code="server_error", message="boom", param=None)])
    assert a.status == "error" and a.terminal
    assert a.error == {"code": "server_error", "message": "boom", "param": None}
    assert a.view.meta["status"] == "error" and a.view.meta["error"]["message"] == "boom"
    assert text_of(a) == "partial"
    # the wire form nests the fields under "error"
    b = feed(Assembler(), [ev("error", 0, error={"code": "c", "message": "m"})])
    assert b.error == {"code": "c", "message": "m", "param": None}


def test_error_then_failed_is_failed() -> None:
    a = feed(Assembler(), [*head(), ev("error", 4, code="insufficient_quota", message="quota"),
                           ev("response.failed", 5, response=response("failed"))])
    assert a.status == "failed" and a.terminal
    assert a.view.meta["status"] == "failed"
    assert a.view.meta["error"]["code"] == "insufficient_quota"  # the failed response had none
    b = feed(Assembler(), [ev("error", 0, code="x", message="y"),
                           ev("response.failed", 1, response=response(
                               "failed", error={"code": "server_error", "message": "z"}))])
    assert b.view.meta["error"] == {"code": "server_error", "message": "z"}


def test_incomplete_and_cancelled_statuses() -> None:
    a = feed(Assembler(), [*head(), ev("response.incomplete", 4, response=response(
        "incomplete", incomplete_details={"reason": "max_output_tokens"}))])
    assert a.status == "incomplete" and a.view.meta["incomplete_reason"] == "max_output_tokens"
    b = feed(Assembler(), [*head(), ev("response.failed", 4, response=response("cancelled"))])
    assert b.status == "cancelled" and b.terminal


def test_stream_without_terminal_is_not_terminal() -> None:
    a = feed(Assembler(), [*head(), delta(4, "cut off")])
    assert not a.terminal and a.status == "in_progress"
    assert text_of(a) == "cut off"
    assert a.view.meta["status"] == "in_progress"


# --- repairs and anomalies ------------------------------------------------------------------


def test_delta_before_item_is_repaired_and_recorded() -> None:
    a = feed(Assembler(), [*head()[:2], delta(2, "orphan")])
    assert text_of(a) == "orphan"
    assert len(a.stats.anomalies) == 2  # the item and the part were both missing
    assert "never added" in a.stats.anomalies[0]
    assert block(a, "o0-c0")["text"] == "orphan"
    # the item arriving late is taken as the same item, not a second one
    a.feed(ev("response.content_part.added", 3, **WHERE, part={"type": "output_text", "text": ""}))
    a.feed(delta(4, " text"))
    assert text_of(a) == "orphan text" and len(a.response()["output"]) == 1
    assert replayed(a.view) == a.view.to_dict()


def test_delta_without_addressing_is_repaired_each_time() -> None:
    a = feed(Assembler(), [*head()[:2], ev("response.output_text.delta", 2, delta="x"),
                           ev("response.output_text.delta", 3, delta="y")])
    # nothing ties the two deltas together: each is repaired into an item of its own
    assert [item["content"][0]["text"] for item in a.response()["output"]] == ["x", "y"]
    assert len(a.stats.anomalies) == 4


def test_non_string_delta_is_recorded_not_raised() -> None:
    a = feed(Assembler(), [*head(), delta(4, "a"),
                           ev("response.output_text.delta", 5, **WHERE, delta=None),
                           ev("response.output_text.delta", 6, **WHERE, delta=7), delta(7, "b")])
    assert text_of(a) == "ab" and a.view.to_dict()["blocks"][0]["text"] == "ab"
    assert len(a.stats.anomalies) == 2


def test_reasoning_item_added_with_its_parts_takes_deltas() -> None:
    a = feed(Assembler(), [ev("response.output_item.added", 0, output_index=0, item={
        "id": "rs_1", "type": "reasoning", "summary": [],
        "content": [{"type": "reasoning_text", "text": ""}]}),
        ev("response.reasoning_text.delta", 1, item_id="rs_1", output_index=0, content_index=0,
           delta="think")])
    assert a.response()["output"][0]["content"][0]["text"] == "think"
    assert block(a, "o0-c0") == {"id": "o0-c0", "kind": "reasoning", "item_id": "rs_1",
                                 "state": "streaming", "text": "think"}
    assert replayed(a.view) == a.view.to_dict()


# --- tools ----------------------------------------------------------------------------------


def test_tool_state_only_from_events() -> None:
    ws = {"item_id": "ws_1", "output_index": 0}
    a = feed(Assembler(), [ev("response.output_item.added", 0, output_index=0,
                              item={"id": "ws_1", "type": "web_search_call",
                                    "status": "in_progress"})])
    assert block(a, "o0")["state"] == "in_progress"
    a.feed(ev("response.web_search_call.in_progress", 1, **ws))
    assert block(a, "o0")["state"] == "in_progress"  # no guessing ahead of the events
    a.feed(ev("response.web_search_call.searching", 2, **ws))
    assert block(a, "o0")["state"] == "searching"
    a.feed(ev("response.web_search_call.completed", 3, **ws))
    assert block(a, "o0")["state"] == "completed"
    a.feed(ev("response.output_item.done", 4, output_index=0, item={
        "id": "ws_1", "type": "web_search_call", "status": "completed",
        "action": {"type": "search", "query": "weather"}}))
    assert block(a, "o0")["state"] == "completed" and block(a, "o0")["query"] == "weather"
    assert replayed(a.view) == a.view.to_dict()


def test_function_arguments_exposed_only_when_done() -> None:
    fc = {"item_id": "fc_1", "output_index": 0}
    a = feed(Assembler(), [ev("response.output_item.added", 0, output_index=0, item={
        "id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "lookup",
        "arguments": "", "status": "in_progress"})])
    a.view.take_ops()
    for i, piece in enumerate(['{"ci', 'ty": ', '"Paris"}']):
        a.feed(ev("response.function_call_arguments.delta", 1 + i, **fc, delta=piece))
    assert a.view.take_ops()[1] == []  # no partial arguments reach the view
    assert "arguments" not in block(a, "o0") and block(a, "o0")["text"] == ""
    assert a.response()["output"][0]["arguments"] == '{"city": "Paris"}'  # the snapshot has them
    a.feed(ev("response.function_call_arguments.done", 4, **fc, arguments='{"city": "Paris"}'))
    assert block(a, "o0")["arguments"] == '{"city": "Paris"}'
    assert block(a, "o0")["name"] == "lookup"


def test_annotations_reach_the_view() -> None:
    note = {"type": "url_citation", "url": "https://example.com", "start_index": 0,
            "end_index": 2}
    a = feed(Assembler(), [*head(), delta(4, "hi"),
                           ev("response.output_text.annotation.added", 5, **WHERE,
                              annotation_index=0, annotation=note)])
    assert block(a, "o0-c0")["annotations"] == [note]
    assert a.response()["output"][0]["content"][0]["annotations"] == [note]


# --- the fast path for text deltas ------------------------------------------------------------


def test_feed_many_matches_feed_across_parts_and_items() -> None:
    other = {"item_id": MSG, "output_index": 0, "content_index": 1}
    events = [*head(), delta(4, "a"), delta(5, "b"),
              ev("response.content_part.added", 6, **other, part={"type": "refusal",
                                                                   "refusal": ""}),
              ev("response.refusal.delta", 7, **other, delta="no"), delta(8, "c"),
              ev("response.refusal.delta", 9, **other, delta="pe"), delta(11, "e"),
              delta(10, "d"), delta(10, "d")]
    one, many = Assembler(), Assembler()
    feed(one, events)
    many.feed_many(events)
    assert many.response() == one.response()
    assert many.view.to_dict() == one.view.to_dict()
    assert many.stats == one.stats and many.last_sequence_number == one.last_sequence_number == 11
    assert text_of(many) == "abcde"
    assert many.response()["output"][0]["content"][1]["refusal"] == "nope"


def test_reading_between_batches_loses_nothing() -> None:
    a = Assembler()
    a.feed_many(head())
    for i in range(50):
        a.feed_many([delta(4 + 2 * i, "x"), delta(5 + 2 * i, "y")])
        assert text_of(a) == "xy" * (i + 1)
        assert block(a, "o0-c0")["text"] == "xy" * (i + 1)


# --- cost is linear -------------------------------------------------------------------------


@pytest.mark.skipif(native.ACTIVE, reason="counts calls by patching the core's classes, which compiled classes "
                    "refuse: `make test` runs it again interpreted")
@pytest.mark.parametrize("batched", [False, True])
def test_text_cost_is_linear(monkeypatch: pytest.MonkeyPatch, batched: bool) -> None:
    """100,000 deltas, the snapshot read every 1,000: every delta is joined (or folded) into the text once.

    Counted, not timed: a join handles the pieces added since the last read plus the one string
    it left behind, so the pieces handled over the whole stream are deltas + reads, and no
    delta ever causes a join or copy of the text by itself."""
    pieces_joined = 0
    joins = 0
    value = items.Chunks.value.fget  # type: ignore[attr-defined]

    def counting_value(self: items.Chunks) -> str:
        nonlocal pieces_joined, joins
        if len(self._parts) > 1:
            pieces_joined += len(self._parts)
            joins += 1
        return value(self)  # type: ignore[no-any-return]

    monkeypatch.setattr(items.Chunks, "value", property(counting_value))
    fold = items.Chunks.fold

    def counting_fold(self: items.Chunks) -> None:  # what a read's share_text does: the same count
        nonlocal pieces_joined, joins
        if len(self._parts) > 1:
            pieces_joined += len(self._parts)
            joins += 1
        fold(self)

    monkeypatch.setattr(items.Chunks, "fold", counting_fold)
    view_texts = 0
    view_text = ViewModel.text

    def counting_text(self: ViewModel, block_id: str) -> str:
        nonlocal view_texts
        view_texts += 1
        return view_text(self, block_id)

    monkeypatch.setattr(ViewModel, "text", counting_text)

    a = Assembler()
    a.feed_many(head())
    n, every = 100_000, 1_000
    part = a._items[0].parts[0]
    longest = 0
    for start in range(4, 4 + n, every):
        batch = [delta(seq, "w ") for seq in range(start, start + every)]
        if batched:
            a.feed_many(batch)
        else:
            feed(a, batch)
        longest = max(longest, len(part.text._parts))
        text_of(a)
        assert len(part.text._parts) == 1  # a read leaves one string behind
    assert text_of(a) == "w " * n
    reads = n // every
    assert joins == reads
    assert pieces_joined == n + reads - 1  # each delta once, plus the string each read left
    assert longest == every + 1
    assert view_texts == 0  # the view's text is never joined on its own ...
    assert a.view._chunks["o0-c0"][0] is part.text._parts[0]  # ... it shares the part's string
    _, ops = a.view.take_ops()
    assert sum(1 for op in ops if op[0] == "append") == n  # one O(delta) op per delta


def test_oversized_event_is_reported_and_its_neighbours_kept() -> None:
    from responses_app.streaming.pipeline import StreamPipeline

    def delta(seq: int, text: str) -> bytes:
        return (f'data: {{"type":"response.output_text.delta","sequence_number":{seq},"item_id":"m",'
                f'"output_index":0,"content_index":0,"delta":"{text}"}}\n\n').encode()

    head = (b'data: {"type":"response.created","sequence_number":0,'
            b'"response":{"id":"resp_1","status":"in_progress"}}\n\n'
            b'data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,'
            b'"item":{"id":"m","type":"message","content":[]}}\n\n'
            b'data: {"type":"response.content_part.added","sequence_number":2,"item_id":"m","output_index":0,'
            b'"content_index":0,"part":{"type":"output_text","text":""}}\n\n')
    completed = (b'data: {"type":"response.completed","sequence_number":6,'
                 b'"response":{"id":"resp_1","status":"completed"}}\n\n')
    pipeline = StreamPipeline(max_event_bytes=1024)
    events = pipeline.feed(head + delta(3, "a") + delta(4, "x" * 5000) + delta(5, "b") + completed).events
    assert [e.get("sequence_number") for e in events] == [0, 1, 2, 3, 5, 6]
    assert pipeline.oversized == 1 and "exceeds" in pipeline.problems[0].message
    assert pipeline.assembler.held_count == 2, "seq 5 and the terminal event wait for the hole the oversized event left"
    assert pipeline.finish().applied.terminal, "the stream's end releases a terminal event held behind a gap"
    assert pipeline.assembler.stats.gaps == 1
    assert pipeline.assembler.response()["output"][0]["content"][0]["text"] == "ab"


def test_a_part_and_its_view_block_hold_one_string_not_two() -> None:
    a = Assembler()
    a.feed_many([*head(), *(delta(4 + i, f"w{i} ") for i in range(200))])
    view_text = a.view.to_dict()["blocks"][0]["text"]
    snapshot_text = a.response()["output"][0]["content"][0]["text"]
    assert view_text == snapshot_text == "".join(f"w{i} " for i in range(200))
    assert a.view.text("o0-c0") is snapshot_text, "the joined text is shared, not copied"
    # Later deltas still reach both, and the next join shares again, in either order.
    a.feed_many([delta(204 + i, "x") for i in range(3)])
    snapshot_text = a.response()["output"][0]["content"][0]["text"]
    assert snapshot_text.endswith("w199 xxx") and a.view.text("o0-c0") is snapshot_text
    # A view text the assembler did not write is left alone.
    a.view.set("o0-c0", {"text": "edited"})
    assert text_of(a).endswith("xxx") and a.view.text("o0-c0") == "edited"
    assert replayed(a.view) == a.view.to_dict()

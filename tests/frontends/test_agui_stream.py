"""AG-UI from the relay's views, without a database: every simulator capture, however chunked,
reads as a valid run to a strict consumer that ends holding the view's text; resuming from any
event's id, from a view older, as old or newer than the client, repeats nothing and loses nothing;
approvals pause the run and a resume continues it."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import EventType

from responses_app.frontends.agui import AguiStream, last_user_text, parse_input, resume_answers
from responses_app.frontends.told import CursorError, Told
from tests.frontends.agui_client import EVENT, Consumer
from tests.frontends.views import Views, approval_scenario, scenario, timeline

SCENARIOS = ["sim-text", "sim-long", "sim-citations", "sim-reasoning", "sim-function", "sim-parallel-functions",
             "sim-refusal", "sim-file-search", "sim-code-interpreter", "sim-mcp", "sim-image", "sim-incomplete"]


def parse(frames: list[str]) -> list[tuple[str, Any]]:
    events = []
    for frame in frames:
        lines = frame.rstrip("\n").split("\n")
        assert lines[0].startswith("id: ") and lines[1].startswith("data: "), frame
        events.append((lines[0][4:], EVENT.validate_json(lines[1][6:])))
    return events


def follow(views: Views, stream: AguiStream | None = None, final: str = "completed") -> list[tuple[str, Any]]:
    stream = stream or AguiStream(request_id="req", thread_id="thread")
    out: list[tuple[str, Any]] = []
    for view, status, ended in timeline(views, final):
        out.extend(parse(stream.frames(view, status, ended=ended)))
    return out


def texts(view: dict[str, Any], kinds: tuple[str, ...]) -> list[str]:
    return [b["text"] for b in view["blocks"] if b["kind"] in kinds and (b["kind"] != "reasoning" or "-" in b["id"])]


@pytest.mark.parametrize("name", SCENARIOS)
@pytest.mark.parametrize("chunk", [7, 97, 100_000])
def test_a_whole_request_reads_as_one_valid_run(name: str, chunk: int) -> None:
    views = scenario(name, chunk)
    events = follow(views, final="incomplete" if name == "sim-incomplete" else "completed")
    consumer = Consumer().feed([e for _, e in events])
    final = views.seen[-1]
    assert list(consumer.messages.values()) == texts(final, ("text", "refusal"))
    assert list(consumer.reasoning.values()) == texts(final, ("reasoning",))
    assert consumer.runs == [("req", "success")] and not consumer.run_open
    assert consumer.state["meta"] == final["meta"]
    assert [b["id"] for b in consumer.state["blocks"]] == [b["id"] for b in final["blocks"]]


def test_tool_calls_carry_arguments_and_results() -> None:
    views = scenario("sim-parallel-functions")
    consumer = Consumer().feed([e for _, e in follow(views)])
    blocks = [b for b in views.seen[-1]["blocks"] if b.get("tool") == "function_call"]
    assert len(blocks) == 2
    assert {c: (t["name"], t["args"], t["result"]) for c, t in consumer.tools.items()} == {
        b["call_id"]: (b["name"], b["arguments"], b["output"]) for b in blocks}


@pytest.mark.parametrize("name", ["sim-function", "sim-reasoning", "sim-citations"])
def test_resume_after_any_event_from_any_view_repeats_nothing(name: str) -> None:
    views = scenario(name, 53)
    events = follow(views)
    expected = Consumer().feed([e for _, e in events])
    for cut in range(1, len(events)):
        told = Told.from_cursor(events[cut - 1][0], "req")
        assert told.cursor() == events[cut - 1][0]
        for start in (0, len(views.seen) // 3, len(views.seen) - 1):  # older, middling, the final view
            stream = AguiStream(request_id="req", thread_id="thread", told=Told.from_cursor(events[cut - 1][0], "req"))
            rest = []
            for index, (view, status, ended) in enumerate(timeline(views)):
                if index >= start:
                    rest.extend(e for _, e in parse(stream.frames(view, status, ended=ended)))
            consumer = Consumer().feed([e for _, e in events[:cut]] + rest)
            assert (consumer.messages, consumer.reasoning, consumer.tools, consumer.runs) == (
                expected.messages, expected.reasoning, expected.tools, expected.runs), (cut, start)
            assert consumer.state == expected.state


def test_a_resumed_stream_opens_with_the_state_not_a_second_run() -> None:
    views = scenario("sim-long", 400)
    events = follow(views)
    middle = next(i for i, (_, e) in enumerate(events) if e.type == EventType.TEXT_MESSAGE_CONTENT) + 3
    stream = AguiStream(request_id="req", thread_id="thread", told=Told.from_cursor(events[middle][0], "req"))
    first = parse(stream.frames(views.seen[-1], "completed", ended=True))
    assert first[0][1].type == EventType.STATE_SNAPSHOT
    assert EventType.RUN_STARTED not in [e.type for _, e in first]
    assert stream.closed


def test_approvals_pause_the_run_and_resume_continues_it() -> None:
    views, asked, waiting = approval_scenario()
    stream = AguiStream(request_id="req", thread_id="thread", run_id="run-1")
    first: list[Any] = []
    for view, status, ended in timeline(views):
        first.extend(e for _, e in parse(stream.frames(view, status, ended=ended)))
        if stream.closed:
            break
    finished = first[-1]
    assert finished.type == EventType.RUN_FINISHED and finished.outcome.type == "interrupt"
    assert [i.id for i in finished.outcome.interrupts] == asked
    consumer = Consumer().feed(first)
    assert consumer.runs == [("run-1", "interrupt")]
    # the resume: what the client was told, computed from any view since, then the rest as a new run
    told = Told.paused_at(views.seen[waiting + 1], set(asked), "req")
    resumed = AguiStream(request_id="req", thread_id="thread", run_id="run-2", told=told)
    assert parse(resumed.frames(views.seen[waiting], "streaming")) == []  # still waiting: nothing
    second = [e for view, status, ended in list(timeline(views))[waiting:]
              for _, e in parse(resumed.frames(view, status, ended=ended))]
    assert second[0].type == EventType.RUN_STARTED and second[0].run_id == "run-2"
    consumer.feed(second)
    assert consumer.runs == [("run-1", "interrupt"), ("run-2", "success")]
    assert list(consumer.messages.values()) == texts(views.seen[-1], ("text",))


@pytest.mark.parametrize(("status", "outcome"), [("cancelled", "cancelled"), ("failed", "error"),
                                                 ("unknown", "error"), ("error", "error")])
def test_each_ending_is_told_for_what_it_is(status: str, outcome: str) -> None:
    views = scenario("sim-long", 500)
    views.seen = views.seen[: len(views.seen) // 2]  # it ends mid-answer
    events = [e for _, e in follow(views, final=status)]
    consumer = Consumer().feed(events)  # everything open is closed first
    assert consumer.runs[-1][1] == outcome
    if outcome == "error":
        assert events[-1].type == EventType.RUN_ERROR and events[-1].code == status


@pytest.mark.parametrize("cursor", ["", "x", "0", "0.1.5t3", "0.1.0q", "1.2.0t", "99999999.1", "0.20000"])
def test_a_cursor_it_did_not_write_is_refused(cursor: str) -> None:
    with pytest.raises(CursorError):
        Told.from_cursor(cursor, "req")


def test_input_is_the_newest_user_message_and_resume_answers_are_strict() -> None:
    run = parse_input(b'{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"first"},'
                      b'{"id":"2","role":"assistant","content":"x"},{"id":"3","role":"user","content":'
                      b'[{"type":"text","text":"sec"},{"type":"text","text":"ond"}]}],'
                      b'"resume":[{"interruptId":"a","status":"resolved","payload":{"approve":true}},'
                      b'{"interruptId":"b","status":"cancelled"},{"interruptId":"c","status":"resolved","payload":false}]}')
    assert last_user_text(run) == "second"
    assert resume_answers(run.resume or []) == {"a": True, "b": False, "c": False}
    bad = parse_input(b'{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"a","status":"resolved"}]}')
    with pytest.raises(ValueError):
        resume_answers(bad.resume or [])
    with pytest.raises(ValueError):
        parse_input(b'{"threadId":"t"}')


def test_a_gap_brings_a_fresh_state_snapshot_and_no_repeat() -> None:
    views = scenario("sim-function", 53)
    stream = AguiStream(request_id="req", thread_id="thread")
    events: list[Any] = []
    for index, (view, status, ended) in enumerate(timeline(views)):
        if index % 5 == 4 or ended:  # patches lost on the way: a fresh snapshot of the view instead
            events.extend(e for _, e in parse(stream.frames(view, status, ended=ended, fresh=True)))
    kinds = [e.type for e in events]
    assert kinds.count(EventType.STATE_SNAPSHOT) > 1 and EventType.STATE_DELTA not in kinds
    consumer = Consumer().feed(events)
    assert list(consumer.messages.values()) == texts(views.seen[-1], ("text",))
    assert consumer.state["meta"] == views.seen[-1]["meta"] and consumer.runs == [("req", "success")]

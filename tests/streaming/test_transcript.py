"""The transcript: bytes in, view ops and effects out, one writer of the view across tool rounds."""

from __future__ import annotations

from pathlib import Path

from responses_app.streaming.transcript import TAKEOVER_REVISION_GAP, Transcript
from responses_app.streaming.view import apply_patch

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sim"


def blocks(name: str) -> list[bytes]:
    body = (FIXTURES / name).read_bytes()
    return [block + b"\n\n" for block in body.split(b"\n\n") if block.strip()]


def follow(view: dict, base: int, ops: list, revision: int, windows: object = ()) -> None:
    assert apply_patch(view, {"base": base, "ops": ops, "revision": revision})


def test_effects_come_as_values_one_event_at_a_time() -> None:
    t = Transcript()
    steps = [t.feed(block) for block in blocks("sim-text.sse")]
    kinds = [b.split(b'"type":"', 1)[1].split(b'"', 1)[0].decode() for b in blocks("sim-text.sse")]
    boundaries = [kind for kind, step in zip(kinds, steps, strict=True) if step.boundary]
    assert boundaries == ["response.content_part.done", "response.output_item.done", "response.completed"]
    firsts = [kind for kind, step in zip(kinds, steps, strict=True) if step.first_text]
    assert firsts == ["response.output_text.delta"], "the first text is reported once"
    assert not any(step.first_tool for step in steps)
    assert [step.terminal for step in steps].index(True) == len(steps) - 1
    assert t.status == "completed" and t.response_id


def test_the_ops_of_every_step_rebuild_the_view() -> None:
    t = Transcript()
    shown = {"revision": 0, "meta": {"response_id": None, "status": None}, "blocks": []}
    for chunk in blocks("sim-reasoning.sse"):
        step = t.feed(chunk)
        if step.change.ops:
            follow(shown, *step.change)
    assert shown == t.view.to_dict()


def test_a_tool_round_is_drawn_into_the_same_view_and_text_is_first_once() -> None:
    t = Transcript()
    shown = {"revision": 0, "meta": {"response_id": None, "status": None}, "blocks": []}
    tool_steps = [t.feed(chunk) for chunk in blocks("sim-function.sse")]
    for step in tool_steps:
        if step.change.ops:
            follow(shown, *step.change)
    assert any(step.first_tool for step in tool_steps)
    calls = t.function_calls()
    assert calls and calls[0]["call_id"]
    for change in (t.tools_started(), t.tool_running(calls[0]["id"]),
                   t.tool_done(calls[0]["id"], '{"ok": true}'), t.tools_finished()):
        if change.ops:
            follow(shown, *change)
    t.next_response()
    assert t.round == 1 and not t.terminal
    steps = [t.feed(chunk) for chunk in blocks("sim-function.tool-result.sse")]
    for step in steps:
        if step.change.ops:
            follow(shown, *step.change)
    assert shown == t.view.to_dict()
    assert sum(step.first_text for step in [*tool_steps, *steps]) == 1
    view = t.view.to_dict()
    tool = next(b for b in view["blocks"] if b["kind"] == "tool")
    assert tool["state"] == "done" and tool["output"] == '{"ok": true}'
    assert any(b["id"].startswith("r1-") for b in view["blocks"]), "the continuation's blocks are prefixed"
    assert t.final_text()
    assert t.counters()["events"] == len(tool_steps) + len(steps)


def test_the_relay_ending_is_shown_only_when_no_terminal_event_said_otherwise() -> None:
    t = Transcript()
    for chunk in blocks("sim-text.sse")[:6]:
        t.feed(chunk)
    change = t.end("unknown", ("stalled", "no bytes"))
    assert change.ops == [["meta", {"status": "unknown", "error": {"code": "stalled", "message": "no bytes"}}]]
    done = Transcript()
    for chunk in blocks("sim-text.sse"):
        done.feed(chunk)
    assert done.end("cancelled").ops == [], "a completed response keeps its own status"


def test_the_end_of_a_stream_releases_what_waits_behind_a_gap() -> None:
    t = Transcript(hold_window=1000)
    chunks = blocks("sim-text.sse")
    for chunk in chunks[:5] + chunks[6:]:  # one event lost: the rest waits behind the gap
        t.feed(chunk)
    assert not t.terminal
    step = t.finish()
    assert step.terminal and step.boundary and t.status == "completed"


def test_restore_rebuilds_from_the_log_and_moves_the_revision_past_the_committed_one() -> None:
    live = Transcript()
    data = b"".join(blocks("sim-text.sse")[:10])
    live.feed(data)
    restored = Transcript()
    restored.restore([(0, data)], committed_revision=live.view.revision + 5)
    assert restored.view.to_dict()["blocks"] == live.view.to_dict()["blocks"]
    assert restored.view.revision == live.view.revision + 5 + TAKEOVER_REVISION_GAP
    assert restored.take_ops().ops == []


def test_apply_final_takes_the_upstreams_word_for_the_outcome() -> None:
    t = Transcript()
    for chunk in blocks("sim-text.sse")[:6]:
        t.feed(chunk)
    assert t.apply_final({"id": t.response_id, "status": "in_progress"}).ops == [], "not final: nothing"
    change = t.apply_final({"id": t.response_id, "status": "incomplete", "output": [],
                            "incomplete_details": {"reason": "max_output_tokens"}})
    assert change.ops and t.status == "incomplete" and t.view.meta["incomplete_reason"] == "max_output_tokens"

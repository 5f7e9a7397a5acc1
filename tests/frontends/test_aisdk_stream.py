"""The AI SDK's UI message stream from the relay's views, without a database: a valid chunk sequence
that rebuilds the view's text, reasoning and tool calls; a replay (the resume route) from any later
view is the same message; approvals, endings; and the JSON Patch behind AG-UI's STATE_DELTA."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from responses_app.frontends import jsonpatch
from responses_app.frontends.aisdk import DONE, AisdkStream, approval_answers, last_user_text
from responses_app.frontends.told import Told
from tests.frontends.views import approval_scenario, scenario, timeline


def chunks(frames: list[str]) -> list[Any]:
    out = []
    for frame in frames:
        assert frame.startswith("data: ") and frame.endswith("\n\n")
        out.append("[DONE]" if frame == DONE else orjson.loads(frame[6:]))
    return out


def message_of(stream: list[Any]) -> dict[str, Any]:
    """What useChat builds from the chunks (the parts it keeps), refusing a malformed sequence."""
    parts: dict[str, dict[str, Any]] = {}
    open_: set[str] = set()
    message: dict[str, Any] = {"id": None, "parts": parts, "finish": None}
    for chunk in stream:
        if chunk == "[DONE]":
            continue
        kind = chunk["type"]
        key = chunk.get("id") or chunk.get("toolCallId")
        if kind == "start":
            message["id"] = chunk["messageId"]
        elif kind in ("text-start", "reasoning-start", "tool-input-start"):
            assert key not in parts, f"{key} started twice"
            parts[key] = {"type": kind.split("-")[0], "text": "", "output": None}
            open_.add(key)
        elif kind in ("text-delta", "reasoning-delta"):
            assert key in open_
            parts[key]["text"] += chunk["delta"]
        elif kind == "tool-input-delta":
            parts[key]["text"] += chunk["inputTextDelta"]
        elif kind in ("text-end", "reasoning-end", "tool-input-available"):
            assert key in open_
            open_.discard(key)
            if kind == "tool-input-available":
                parts[key]["input"] = chunk["input"]
        elif kind == "tool-output-available":
            parts[key]["output"] = chunk["output"]
        elif kind in ("start-step", "finish-step"):
            message.setdefault("steps", []).append(kind)
        elif kind in ("finish", "abort", "error", "tool-approval-request"):
            message.setdefault("ends", []).append(chunk)
    assert not open_ and stream[-1] == "[DONE]"
    return message


def follow(name: str, final: str = "completed") -> tuple[list[Any], Any]:
    views = scenario(name, 61)
    stream = AisdkStream(request_id="req")
    out: list[Any] = []
    for view, status, ended in timeline(views, final):
        out.extend(chunks(stream.frames(view, status, ended=ended)))
    return out, views


@pytest.mark.parametrize("name", ["sim-text", "sim-reasoning", "sim-function", "sim-parallel-functions", "sim-mcp"])
def test_a_request_is_one_message(name: str) -> None:
    stream, views = follow(name)
    message = message_of(stream)
    final = views.seen[-1]
    assert message["id"] == "req" and stream[0]["type"] == "start"
    assert [p["text"] for p in message["parts"].values() if p["type"] == "text"] == [
        b["text"] for b in final["blocks"] if b["kind"] == "text"]
    tools = {b.get("call_id") or b["item_id"]: b for b in final["blocks"] if b["kind"] == "tool" and b.get("name")}
    for call_id, block in tools.items():
        part = message["parts"][call_id]
        assert part["input"] == orjson.loads(block["arguments"])
        if "output" in block:
            assert part["output"] == orjson.loads(block["output"])
    assert message["ends"] == [{"type": "finish", "finishReason": "stop", "messageMetadata": {"status": "completed"}}]


def test_a_replay_from_any_later_view_is_the_same_message() -> None:
    stream, views = follow("sim-function")
    whole = message_of(stream)
    for start in range(0, len(views.seen), 7):
        replay = AisdkStream(request_id="req")
        out: list[Any] = []
        for index, (view, status, ended) in enumerate(timeline(views)):
            if index >= start:
                out.extend(chunks(replay.frames(view, status, ended=ended)))
        assert message_of(out) == whole


def test_approvals_finish_the_message_and_the_answer_continues_it() -> None:
    views, asked, waiting = approval_scenario(approve=False)
    stream = AisdkStream(request_id="req")
    first: list[Any] = []
    for view, status, ended in timeline(views):
        first.extend(chunks(stream.frames(view, status, ended=ended)))
        if stream.closed:
            break
    assert [c["approvalId"] for c in first if c != "[DONE]" and c["type"] == "tool-approval-request"] == asked
    assert first[-2]["finishReason"] == "tool-calls" and first[-1] == "[DONE]"
    assert message_of(first)["steps"] == ["start-step", "finish-step"]
    resumed = AisdkStream(request_id="req", told=Told.paused_at(views.seen[waiting], set(asked), "req"))
    second = [c for view, status, ended in list(timeline(views))[waiting:]
              for c in chunks(resumed.frames(view, status, ended=ended))]
    assert second[0] == {"type": "start", "messageId": "req", "messageMetadata": {"requestId": "req"}}
    assert not set(message_of(first)["parts"]) & set(message_of(second)["parts"])  # appended, nothing twice


@pytest.mark.parametrize(("status", "ending"), [
    ("cancelled", [{"type": "abort", "reason": "cancelled"}]),
    ("failed", [{"type": "error", "errorText": "The response ended failed."},
                {"type": "finish", "finishReason": "error", "messageMetadata": {"status": "failed"}}]),
    ("unknown", [{"type": "error", "errorText": "The relay could not tell how the response ended."},
                 {"type": "finish", "finishReason": "error", "messageMetadata": {"status": "unknown"}}]),
])
def test_each_ending_is_told_for_what_it_is(status: str, ending: list[Any]) -> None:
    views = scenario("sim-long", 500)
    views.seen = views.seen[: len(views.seen) // 2]
    stream = AisdkStream(request_id="req")
    out = [c for view, st_, ended in timeline(views, status) for c in chunks(stream.frames(view, st_, ended=ended))]
    assert message_of(out)["ends"] == ending


def test_input_and_approval_answers_from_use_chat_messages() -> None:
    user = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]}
    assert last_user_text([user]) == ("Hello", "m1")
    assistant = {"id": "req-1", "role": "assistant", "parts": [
        {"type": "dynamic-tool", "toolCallId": "a", "state": "approval-responded",
         "approval": {"id": "a", "approved": True}},
        {"type": "dynamic-tool", "toolCallId": "b", "state": "approval-requested", "approval": {"id": "b"}}]}
    assert approval_answers([user, assistant]) == ("req-1", {"a": True})
    assert approval_answers([user]) == (None, {})
    assert last_user_text([user, assistant]) == ("", None)


JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
                    max_leaves=20)


@given(JSON, JSON)
def test_json_patch_turns_one_document_into_the_other(old: Any, new: Any) -> None:
    assert jsonpatch.apply(orjson.loads(orjson.dumps(old)), jsonpatch.diff(old, new)) == new


def test_json_pointer_escapes() -> None:
    assert jsonpatch.diff({"a/b": {"~": 1}}, {"a/b": {"~": 2}}) == [{"op": "replace", "path": "/a~1b/~0", "value": 2}]

"""A continuation's stream, without a database: AG-UI carries its text as the message the answer
before it ended with (only the new text), the AI SDK names the turn's message and, on a replay,
tells the parts before it first; the parts ended with anything but text start a message of their own."""

from __future__ import annotations

from typing import Any

from ag_ui.core import EventType

from responses_app.frontends.agui import AguiStream, continued_message_id
from responses_app.frontends.aisdk import AisdkStream
from tests.frontends.agui_client import Consumer
from tests.frontends.test_agui_stream import follow
from tests.frontends.test_aisdk_stream import chunks, message_of
from tests.frontends.views import Views, scenario, timeline


def part(name: str) -> tuple[Views, str]:
    views = scenario(name)
    return views, "".join(b["text"] for b in views.seen[-1]["blocks"] if b["kind"] == "text")


def test_agui_goes_on_in_the_same_message_with_only_the_new_text() -> None:
    first, said = part("sim-incomplete")
    second, rest = part("sim-text")
    before = follow(first, AguiStream(request_id="req-a", thread_id="t"), final="incomplete")
    joins = continued_message_id([("req-a", first.seen[-1])])
    assert joins is not None
    after = follow(second, AguiStream(request_id="req-b", thread_id="t", joins=joins))
    starts = [e.message_id for _, e in before + after if e.type == EventType.TEXT_MESSAGE_START]
    assert starts == [joins, joins], "the continuation's text starts the same message again"
    assert "".join(e.delta for _, e in after if e.type == EventType.TEXT_MESSAGE_CONTENT) == rest, "nothing again"
    consumer = Consumer(goes_on=True).feed([e for _, e in before + after])
    assert consumer.messages == {joins: said + rest} and [o for _, o in consumer.runs] == ["success", "success"]
    apart = follow(second, AguiStream(request_id="req-b", thread_id="t"))
    assert Consumer(goes_on=True).feed([e for _, e in before + apart]).messages[joins] == said, "without it: two"


def test_a_part_that_ended_without_text_names_no_message() -> None:
    text = {"id": "o0-c0", "kind": "text", "item_id": "msg_a", "text": "Rivers"}
    tool = {"id": "o1", "kind": "tool", "name": "get_weather", "call_id": "call_1", "arguments": "{}"}
    assert continued_message_id([("a", {"blocks": [text]})]) == "msg_a"
    assert continued_message_id([("a", {"blocks": [text, tool]})]) is None
    assert continued_message_id([]) is None
    # a part whose only block went on as the message before it passes that message on
    middle = {"blocks": [{**text, "item_id": "msg_b", "text": " run"}]}
    assert continued_message_id([("a", {"blocks": [text]}), ("b", middle), ("c", {"blocks": []})]) == "msg_a"
    assert continued_message_id([("a", {"blocks": [text, tool]}), ("b", middle)]) == "msg_b"


def _aisdk(views: Views, stream: AisdkStream, final: str) -> list[Any]:
    return chunks([f for view, status, ended in timeline(views, final)
                   for f in stream.frames(view, status, ended=ended)])


def test_aisdk_names_the_turn_s_message_and_a_replay_tells_the_parts_before_it() -> None:
    first, said = part("sim-incomplete")
    second, rest = part("sim-text")
    live = _aisdk(second, AisdkStream(request_id="req-b", message_id="req-a"), "completed")
    assert live[0] == {"type": "start", "messageId": "req-a", "messageMetadata": {"requestId": "req-b"}}
    assert [p["text"] for p in message_of(live)["parts"].values()] == [rest], "the client has the rest already"
    replay = _aisdk(second, AisdkStream(request_id="req-b", message_id="req-a",
                                        earlier=[("req-a", first.seen[-1], "incomplete")]), "completed")
    message = message_of(replay)
    assert message["id"] == "req-a" and [p["text"] for p in message["parts"].values()] == [said, rest]
    assert [c["type"] for c in replay[:-1]].count("start") == 1 and [e["type"] for e in message["ends"]] == ["finish"]

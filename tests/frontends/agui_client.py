"""A small AG-UI client for the tests: SSE read with httpx-sse, every event parsed into the
`ag-ui-protocol` package's own types, and a strict reader that rebuilds what a consumer shows
(messages, reasoning, tool calls, state) and refuses any sequence the protocol forbids."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import httpx
from ag_ui.core import Event, EventType
from httpx_sse import connect_sse
from pydantic import TypeAdapter

from responses_app.frontends import jsonpatch

EVENT = TypeAdapter(Event)


@dataclass
class Received:
    events: list[Any] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)


def read(client: httpx.Client, method: str, url: str, *, stop_after: int | None = None, **kwargs: Any) -> Received:
    """Read a stream to its end (or drop the connection after `stop_after` events)."""
    got = Received()
    with connect_sse(client, method, url, **kwargs) as source:
        got.status, got.headers = source.response.status_code, dict(source.response.headers)
        if source.response.status_code != 200:
            source.response.read()
            return got
        for sse in source.iter_sse():
            got.events.append(EVENT.validate_json(sse.data))
            got.ids.append(sse.id)
            if stop_after is not None and len(got.events) >= stop_after:
                break
    return got


class Consumer:
    """What an AG-UI consumer holds, built event by event, strictly. `goes_on`: a message of an
    earlier run may start again in a later one (a continuation), its text appended; never twice
    within one run."""

    def __init__(self, *, goes_on: bool = False) -> None:
        self.goes_on = goes_on
        self.run_messages: set[str] = set()  # the messages started in the open run
        self.messages: dict[str, str] = {}  # message id -> text
        self.reasoning: dict[str, str] = {}
        self.tools: dict[str, dict[str, Any]] = {}  # call id -> {name, args, result, ended}
        self.state: Any = None
        self.open: set[str] = set()
        self.spans: set[str] = set()
        self.run_open = False
        self.runs: list[tuple[str, Any]] = []  # (run id, outcome or error)

    def feed(self, events: list[Any]) -> Consumer:
        for event in events:
            self.apply(event)
        return self

    def apply(self, event: Any) -> None:
        kind = event.type
        if kind == EventType.RUN_STARTED:
            assert not self.run_open, "RUN_STARTED inside a run"
            self.run_open = True
            self.run_messages = set()
            return
        assert self.run_open, f"{kind} outside a run"
        if kind in (EventType.RUN_FINISHED, EventType.RUN_ERROR):
            assert not self.open and not self.spans, f"{kind} with {self.open | self.spans} open"
            self.run_open = False
            outcome = event.outcome.type if kind == EventType.RUN_FINISHED and event.outcome else (
                "success" if kind == EventType.RUN_FINISHED else "error")
            self.runs.append((getattr(event, "run_id", ""), outcome))
        elif kind == EventType.STATE_SNAPSHOT:
            self.state = copy.deepcopy(event.snapshot)
        elif kind == EventType.STATE_DELTA:
            self.state = jsonpatch.apply(self.state, [op.model_dump(by_alias=True) for op in event.delta])
        elif kind == EventType.TEXT_MESSAGE_START:
            self._start(event.message_id, self.messages)
        elif kind == EventType.TEXT_MESSAGE_CONTENT:
            assert event.message_id in self.open, "content of a message not open"
            self.messages[event.message_id] += event.delta
        elif kind in (EventType.TEXT_MESSAGE_END, EventType.REASONING_MESSAGE_END):
            assert event.message_id in self.open, "end of a message not open"
            self.open.discard(event.message_id)
        elif kind == EventType.REASONING_START:
            assert event.message_id not in self.spans
            self.spans.add(event.message_id)
        elif kind == EventType.REASONING_END:
            assert event.message_id in self.spans
            self.spans.discard(event.message_id)
        elif kind == EventType.REASONING_MESSAGE_START:
            self._start(event.message_id, self.reasoning)
        elif kind == EventType.REASONING_MESSAGE_CONTENT:
            assert event.message_id in self.open
            self.reasoning[event.message_id] += event.delta
        elif kind == EventType.TOOL_CALL_START:
            assert event.tool_call_id not in self.tools, "a tool call started twice"
            assert not self.open, f"a tool call started while {self.open} is open"
            self.tools[event.tool_call_id] = {"name": event.tool_call_name, "args": "", "result": None}
            self.open.add(event.tool_call_id)
        elif kind == EventType.TOOL_CALL_ARGS:
            assert event.tool_call_id in self.open
            self.tools[event.tool_call_id]["args"] += event.delta
        elif kind == EventType.TOOL_CALL_END:
            assert event.tool_call_id in self.open
            self.open.discard(event.tool_call_id)
        elif kind == EventType.TOOL_CALL_RESULT:
            call = self.tools[event.tool_call_id]
            assert call["result"] is None and event.tool_call_id not in self.open, "a result twice, or too early"
            call["result"] = event.content

    def _start(self, message_id: str, into: dict[str, str]) -> None:
        again = self.goes_on and message_id in into and message_id not in self.run_messages
        assert again or message_id not in into, f"message {message_id} started twice"
        assert not self.open, f"{message_id} started while {self.open} is open"
        into.setdefault(message_id, "")
        self.run_messages.add(message_id)
        self.open.add(message_id)

"""A request's view as an AG-UI event stream (https://docs.ag-ui.com, protocol 1.x), built with the
`ag-ui-protocol` package's types and encoder.

`AguiStream.frames(view, status)` turns each newer view into SSE frames: the steps of told.py as
RUN_STARTED, TEXT_MESSAGE_START/CONTENT/END (one message per text part), REASONING_START/END
around REASONING_MESSAGE_* (reasoning summaries), TOOL_CALL_START/ARGS/END/RESULT (per call id),
STATE_SNAPSHOT on (re)connect and STATE_DELTA (RFC 6902) for every other change of the view (its
meta and blocks, without the messages' text), then RUN_FINISHED (completed, incomplete: success;
cancelled: the cancelled outcome) or RUN_ERROR (failed, error, unknown). MCP approval requests end
the run with the interrupt outcome, one interrupt per approval request (id: the approval request
id, answered by a `resume` entry whose payload is `{"approve": true|false}`).

Every frame carries an SSE `id`: told.py's cursor once the client holds that event. AG-UI's own
HTTP binding ignores `id` (it has no resumption); this relay honours it: a stream opened with
`Last-Event-ID` continues exactly after that event (a STATE_SNAPSHOT first, which replaces state
and so repeats nothing). A resumed stream is the rest of the run, so it does not open with
RUN_STARTED; a run paused for approvals continues, on a stream of its own, with a new run.

A continuation (a request that goes on from a stopped or cut-short answer, continuing.py) is a run
of its own whose first text goes on as the message the answer before it ended with (`joins`,
`continued_message_id`): TEXT_MESSAGE_START again with that id, then only the new text.

Pure: no Django, no I/O; ag_ui is an optional dependency (the `agui` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson
from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder

from . import jsonpatch
from .aisdk import error_text
from .told import REASONING, SPAN, TEXT, Told, ToldPart, ToldStep, parts_of

HEARTBEAT = ": keep-alive\n\n"  # an SSE comment, which every AG-UI consumer must tolerate
_SUCCESS = frozenset({"completed", "incomplete"})
APPROVAL_SCHEMA = {"type": "object", "properties": {"approve": {"type": "boolean"}}, "required": ["approve"]}


def state_of(view: dict[str, Any], request_id: str, status: str) -> dict[str, Any]:
    """The AG-UI state: the view without the text its messages carry."""
    blocks = []  # copies: the view's blocks change in place as patches apply
    for block in view.get("blocks") or ():
        if block.get("kind") in ("text", "refusal", "reasoning"):
            blocks.append({k: v for k, v in block.items() if k != "text"})
        else:
            blocks.append(dict(block))
    return {"request": {"id": request_id, "status": status}, "meta": dict(view.get("meta") or {}), "blocks": blocks}


def continued_message_id(earlier: Sequence[tuple[str, dict[str, Any]]]) -> str | None:
    """The message a continuation's first text goes on as: the one the parts before it (request id,
    view; in order) ended with, joined as continuing.join_views joins them; None when they did not
    end with text."""
    carried: str | None = None
    for scope, view in earlier:
        blocks = view.get("blocks") or []
        if not blocks:
            continue
        ids = {part.key: part.id for part, _ in parts_of(view, scope)}
        if carried is not None and blocks[0].get("kind") == "text":
            ids[str(blocks[0]["id"])] = carried
        carried = ids.get(str(blocks[-1]["id"])) if blocks[-1].get("kind") == "text" else None
    return carried


class AguiStream:
    """One client's AG-UI stream of one request; `joins`: a continuation's first text goes on as
    this message (continued_message_id)."""

    def __init__(self, *, request_id: str, thread_id: str, run_id: str | None = None, told: Told | None = None,
                 joins: str | None = None) -> None:
        self.request_id = request_id
        self.joins = joins
        self.thread_id = thread_id
        self.told = told or Told(request_id)
        self._run_id = run_id  # the client's name for the run this stream opens or continues
        self._state: dict[str, Any] | None = None
        self._encoder = EventEncoder()
        self._closed = False

    @property
    def closed(self) -> bool:
        """This stream's run has ended (finished, failed, or paused for approvals): close it."""
        return self._closed or self.told.finished

    def run_id(self, index: int) -> str:
        if self._run_id is not None:
            return self._run_id
        return self.request_id if index == 0 else f"{self.request_id}:{index}"

    def frames(self, view: dict[str, Any], status: str, *, ended: bool = False, fresh: bool = False) -> list[str]:
        """SSE frames bringing the client up to `view`; `ended`: the request has its outcome;
        `fresh`: a snapshot read after a gap, whose state goes out whole (STATE_SNAPSHOT)."""
        before = self.told.cursor()
        was_open = self.told.run >= 0 and self.told.run % 2 == 0
        steps = self.told.advance(view, status if ended else None)
        frames: list[str] = []
        state = state_of(view, self.request_id, status)
        closing = steps[-1] if steps and steps[-1].kind in ("finish", "interrupt") else None
        body = steps[:-1] if closing is not None else steps
        if was_open and self._state is None:  # a resumed run: state first, which repeats nothing
            frames.append(self._frame(StateSnapshotEvent(snapshot=state), before))
            self._state = state
        for step in body:
            frames.append(self._frame(self._event(step, view), step.cursor))
            if step.kind == "run_start":
                frames.append(self._frame(StateSnapshotEvent(snapshot=state), step.cursor))
                self._state = state
        if self._state is not None and self._state != state and (was_open or body):
            at = body[-1].cursor if body else before
            if fresh:
                frames.append(self._frame(StateSnapshotEvent(snapshot=state), at))
            else:
                frames.append(self._frame(StateDeltaEvent.model_validate({"delta": jsonpatch.diff(self._state, state)}),
                                          at))
            self._state = state
        if closing is not None:
            frames.append(self._frame(self._event(closing, view), closing.cursor))
            self._closed = True
        return frames

    def _frame(self, event: BaseEvent, cursor: str) -> str:
        return f"id: {cursor}\n{self._encoder.encode(event)}"

    def _event(self, step: ToldStep, view: dict[str, Any]) -> BaseEvent:
        kind, part = step.kind, step.part
        if kind == "run_start":
            return RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id(step.value),
                                   protocol_version=PROTOCOL_VERSION)
        if kind == "finish":
            return self._finish(step.value, view)
        if kind == "interrupt":
            return RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id(self.told.run // 2),
                                    outcome=RunFinishedInterruptOutcome(interrupts=[
                                        _interrupt(p, block, self.request_id) for p, block in step.value]))
        assert part is not None
        blocks = view.get("blocks") or ()
        if (self.joins is not None and part.kind == TEXT and blocks and blocks[0].get("kind") == "text"
                and str(blocks[0].get("id")) == part.key):
            part = replace(part, id=self.joins)
        return _part_event(kind, part, step.value)

    def _finish(self, status: str, view: dict[str, Any]) -> BaseEvent:
        meta = view.get("meta") or {}
        run_id = self.run_id(self.told.run // 2)
        if status in _SUCCESS:
            result = {"status": status, "requestId": self.request_id}
            if meta.get("incomplete_reason"):
                result["incompleteReason"] = meta["incomplete_reason"]
            return RunFinishedEvent(thread_id=self.thread_id, run_id=run_id, outcome=RunFinishedSuccessOutcome(),
                                    result=result)
        if status == "cancelled":
            return RunFinishedEvent(thread_id=self.thread_id, run_id=run_id, outcome=RunFinishedCancelledOutcome())
        error = meta.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        return RunErrorEvent(message=error_text(meta, status), code=str(code or status))


def _part_event(kind: str, part: ToldPart, value: Any) -> BaseEvent:
    if part.kind == TEXT:
        if kind == "start":
            return TextMessageStartEvent(message_id=part.id, role="assistant")
        if kind == "delta":
            return TextMessageContentEvent(message_id=part.id, delta=value)
        return TextMessageEndEvent(message_id=part.id)
    if part.kind == REASONING:
        if kind == "start":
            return ReasoningMessageStartEvent(message_id=part.id, role="reasoning")
        if kind == "delta":
            return ReasoningMessageContentEvent(message_id=part.id, delta=value)
        return ReasoningMessageEndEvent(message_id=part.id)
    if part.kind == SPAN:
        return ReasoningStartEvent(message_id=part.id) if kind == "start" else ReasoningEndEvent(message_id=part.id)
    if kind == "start":
        return ToolCallStartEvent(tool_call_id=part.id, tool_call_name=part.name)
    if kind == "delta":
        return ToolCallArgsEvent(tool_call_id=part.id, delta=value)
    if kind == "result":
        return ToolCallResultEvent(message_id=f"{part.id}:result", tool_call_id=part.id, content=value, role="tool")
    return ToolCallEndEvent(tool_call_id=part.id)


def _interrupt(part: ToldPart, block: dict[str, Any], request_id: str) -> Interrupt:
    server = block.get("server_label")
    arguments = block.get("arguments") or ""
    return Interrupt(id=part.id, reason="tool_approval", tool_call_id=part.id, response_schema=APPROVAL_SCHEMA,
                     message=f"Allow {server + ': ' if server else ''}{part.name}({arguments})?",
                     metadata={"requestId": request_id})


# --- input ------------------------------------------------------------------------------------


def parse_input(body: bytes) -> RunAgentInput:
    """A RunAgentInput from a request body; raises ValueError (pydantic's included) when it is not one."""
    return RunAgentInput.model_validate(orjson.loads(body or b"null"))


def last_user_text(run_input: RunAgentInput) -> str:
    """The newest user message's text: the relay keeps the conversation, so that is the turn."""
    for message in reversed(run_input.messages):
        if getattr(message, "role", None) != "user":
            continue
        content = getattr(message, "content", "")
        if isinstance(content, str):
            return content
        return "".join(getattr(part, "text", "") or "" for part in content)
    return ""


def resume_answers(entries: list[ResumeEntry]) -> dict[str, bool]:
    """interrupt id -> approve: resolved with `{"approve": bool}` (or a bare bool); an abandoned
    interrupt (status `cancelled`) is a refusal, never an approval."""
    answers = {}
    for entry in entries:
        payload = entry.payload
        if entry.status == "cancelled":
            answers[entry.interrupt_id] = False
        elif isinstance(payload, bool):
            answers[entry.interrupt_id] = payload
        elif isinstance(payload, dict) and isinstance(payload.get("approve"), bool):
            answers[entry.interrupt_id] = payload["approve"]
        else:
            raise ValueError(f"resume entry {entry.interrupt_id!r}: the payload must be {{\"approve\": true|false}}")
    return answers

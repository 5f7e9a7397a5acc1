"""A request's view as the Vercel AI SDK's UI message stream, protocol v1 (what `useChat` reads:
SSE frames of JSON chunks, `data: [DONE]` last, header `x-vercel-ai-ui-message-stream: v1`).

One assistant message per logical request, its `messageId` the request's id, so a replay names the
same message; each of its runs (before and after MCP approvals) a step (`start-step`,
`finish-step`). The steps of told.py become `start`, `text-start/-delta/-end` (answer text),
`reasoning-start/-delta/-end` (reasoning summaries), `tool-input-start/-delta/-available` and
`tool-output-available` (tool calls the relay ran: `providerExecuted`, `dynamic`, so the client's
`onToolCall` never runs them again), then `finish` (`stop`; `length` or `content-filter` for an
incomplete answer; `error` after an `error` chunk for failed, error and unknown) or `abort` for a
cancelled request. MCP approval requests become `tool-approval-request` chunks and the message
finishes (`tool-calls`) until the client answers (`addToolApprovalResponse`).

A continuation (a request that goes on from a stopped or cut-short answer, continuing.py) is
asked for as the AI SDK continues any assistant message, `sendMessage()` with no message while the
last message is the assistant's: its stream names the turn's message (`message_id`, the turn's
first request), so the client appends it to the same message, a step of its own.

Resuming is a replay: the route `useChat({resume: true})` calls answers the whole message so far
from its first `start`, which the client takes as a reset (`resumeStreamIsReplay`, the default of
`DefaultChatTransport`), then the live chunks; never a chunk twice within one message. A
continuation's replay first tells the parts before it again (`earlier`), so the message is whole.

Pure: no Django, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from .told import REASONING, SPAN, TEXT, Told, ToldStep

HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
DONE = "data: [DONE]\n\n"
HEARTBEAT = ": keep-alive\n\n"
_INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content-filter"}


def error_text(meta: dict[str, Any], status: str) -> str:
    """What went wrong, for a person: the view's error, else what the status means."""
    error = meta.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    if message:
        return str(message)
    return "The relay could not tell how the response ended." if status == "unknown" else \
        f"The response ended {status}."


def frame(chunk: dict[str, Any]) -> str:
    return f"data: {orjson.dumps(chunk).decode()}\n\n"


def _json_or_text(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


class AisdkStream:
    """One client's UI message stream of one request."""

    def __init__(self, *, request_id: str, told: Told | None = None, message_id: str | None = None,
                 earlier: Sequence[tuple[str, dict[str, Any], str]] = ()) -> None:
        """`message_id`: the message this request's stream goes on (a continuation's turn), by
        default its own; `earlier`: the ended parts (request id, view, status) a replay tells first."""
        self.request_id = request_id
        self.message_id = message_id or request_id
        self.earlier = list(earlier)
        self.told = told or Told(request_id)
        self._closed = False

    @property
    def closed(self) -> bool:
        """This stream's message finished (the request ended, or waits for approvals): close it."""
        return self._closed or self.told.finished

    def frames(self, view: dict[str, Any], status: str, *, ended: bool = False, fresh: bool = False) -> list[str]:
        """Frames bringing the client up to `view` (`fresh`: a snapshot read after a gap; the
        steps from it are the same, so it changes nothing here)."""
        steps = self.told.advance(view, status if ended else None)
        frames = [frame(chunk) for step in steps for chunk in self._chunks(step, view)]
        if steps and steps[-1].kind in ("finish", "interrupt"):
            frames.append(DONE)
            self._closed = True
        return frames

    def _chunks(self, step: ToldStep, view: dict[str, Any]) -> list[dict[str, Any]]:
        kind, part = step.kind, step.part
        if kind == "run_start":  # a run is a step: the client checks approvals step by step
            replay = [chunk for scope, part_view, status in self.earlier
                      for earlier in Told(scope).advance(part_view, status) if earlier.part is not None
                      for chunk in self._chunks(earlier, part_view)]
            self.earlier = []  # told once, before the first run
            return [{"type": "start", "messageId": self.message_id, "messageMetadata": {"requestId": self.request_id}},
                    {"type": "start-step"}, *replay]
        if kind == "finish":
            return [{"type": "finish-step"}, *self._finish(step.value, view)]
        if kind == "interrupt":
            asked = [{"type": "tool-approval-request", "approvalId": p.id, "toolCallId": p.id} for p, _ in step.value]
            return [*asked, {"type": "finish-step"}, {"type": "finish", "finishReason": "tool-calls",
                                                      "messageMetadata": {"status": "waiting_for_approval"}}]
        assert part is not None
        if part.kind == SPAN:
            return []
        if part.kind in (TEXT, REASONING):
            prefix = "text" if part.kind == TEXT else "reasoning"
            if kind == "delta":
                return [{"type": f"{prefix}-delta", "id": part.id, "delta": step.value}]
            return [{"type": f"{prefix}-{kind}", "id": part.id}]
        tool = {"toolCallId": part.id, "dynamic": True, "providerExecuted": True}
        if kind == "start":
            return [{"type": "tool-input-start", "toolName": part.name, **tool}]
        if kind == "delta":
            return [{"type": "tool-input-delta", "toolCallId": part.id, "inputTextDelta": step.value}]
        if kind == "end":
            block: dict[str, Any] = next((b for b in view.get("blocks") or () if b.get("id") == part.key), {})
            arguments = block.get("arguments", block.get("input"))
            return [{"type": "tool-input-available", "toolName": part.name, "input": _json_or_text(arguments)
                     if isinstance(arguments, str) else arguments, **tool}]
        return [{"type": "tool-output-available", "output": _json_or_text(step.value), **tool}]

    def _finish(self, status: str, view: dict[str, Any]) -> list[dict[str, Any]]:
        meta = view.get("meta") or {}
        metadata: dict[str, Any] = {"status": status}
        if status == "completed":
            return [{"type": "finish", "finishReason": "stop", "messageMetadata": metadata}]
        if status == "incomplete":
            reason = _INCOMPLETE_REASONS.get(str(meta.get("incomplete_reason")), "other")
            return [{"type": "finish", "finishReason": reason, "messageMetadata": metadata}]
        if status == "cancelled":
            return [{"type": "abort", "reason": "cancelled"}]
        return [{"type": "error", "errorText": error_text(meta, status)},
                {"type": "finish", "finishReason": "error", "messageMetadata": metadata}]


# --- input ------------------------------------------------------------------------------------


def last_user_text(messages: list[Any]) -> tuple[str, str | None]:
    """The newest message's text and id when it is the user's (the relay keeps the conversation)."""
    if not messages or not isinstance(messages[-1], dict) or messages[-1].get("role") != "user":
        return "", None
    message = messages[-1]
    parts = message.get("parts")
    if isinstance(parts, list):
        text = "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")
    else:
        content = message.get("content")
        text = content if isinstance(content, str) else ""
    message_id = message.get("id")
    return text, message_id if isinstance(message_id, str) else None


def approval_answers(messages: list[Any]) -> tuple[str | None, dict[str, bool]]:
    """When the newest message is an assistant message carrying answered approval requests
    (`addToolApprovalResponse`): its id (the request's) and approval request id -> approve."""
    if not messages or not isinstance(messages[-1], dict) or messages[-1].get("role") != "assistant":
        return None, {}
    answers = {}
    for part in messages[-1].get("parts") or ():
        approval = part.get("approval") if isinstance(part, dict) else None
        if (isinstance(approval, dict) and part.get("state") == "approval-responded"
                and isinstance(approval.get("id"), str) and isinstance(approval.get("approved"), bool)):
            answers[approval["id"]] = approval["approved"]
    message_id = messages[-1].get("id")
    return (message_id if isinstance(message_id, str) else None), answers

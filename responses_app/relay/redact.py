"""Redaction of sensitive tool payloads before events reach the raw event log.

Only tool data is touched (function/MCP arguments, custom tool input, code, tool outputs);
message text, the structure of items and every id stay, so a redacted log still replays.
"""

from __future__ import annotations

from typing import Any

REDACTED = "[redacted]"

# Streamed tool payloads: event type -> (logical field, event keys holding it).
_STREAMED = {
    "response.function_call_arguments.delta": ("arguments", ("delta",)),
    "response.function_call_arguments.done": ("arguments", ("arguments",)),
    "response.mcp_call_arguments.delta": ("arguments", ("delta",)),
    "response.mcp_call_arguments.done": ("arguments", ("arguments",)),
    "response.custom_tool_call_input.delta": ("input", ("delta",)),
    "response.custom_tool_call_input.done": ("input", ("input",)),
    "response.code_interpreter_call_code.delta": ("code", ("delta",)),
    "response.code_interpreter_call_code.done": ("code", ("code",)),
    "response.shell_call_output_content.delta": ("output", ("delta",)),
    "response.shell_call_output_content.done": ("output", ("output",)),
}
_ITEM_EVENTS = frozenset({"response.output_item.added", "response.output_item.done"})
_RESPONSE_EVENTS = frozenset({
    "response.created", "response.queued", "response.in_progress",
    "response.completed", "response.failed", "response.incomplete",
})
_NOT_TOOLS = frozenset({"message", "reasoning"})


def needs_redaction(event_type: str) -> bool:
    return event_type in _STREAMED or event_type in _ITEM_EVENTS or event_type in _RESPONSE_EVENTS


def redact_event(event: dict[str, Any], fields: frozenset[str]) -> dict[str, Any]:
    """A copy of `event` with the listed tool fields replaced; the event itself is untouched."""
    event_type = event.get("type", "")
    streamed = _STREAMED.get(event_type)
    if streamed is not None:
        field, keys = streamed
        if field not in fields:
            return event
        return {k: (REDACTED if k in keys else v) for k, v in event.items()}
    if event_type in _ITEM_EVENTS and isinstance(event.get("item"), dict):
        return dict(event, item=_redact_item(event["item"], fields))
    if event_type in _RESPONSE_EVENTS and isinstance(event.get("response"), dict):
        response = event["response"]
        output = response.get("output")
        if isinstance(output, list) and output:
            return dict(event, response=dict(response, output=[_redact_item(i, fields) for i in output]))
    return event


def _redact_item(item: Any, fields: frozenset[str]) -> Any:
    if not isinstance(item, dict) or item.get("type") in _NOT_TOOLS:
        return item
    return {k: (REDACTED if k in fields and v not in (None, "", []) else v) for k, v in item.items()}

"""Redaction of sensitive tool payloads before events reach the raw event log.

Every tool payload kind is covered: function and MCP arguments, custom tool input, MCP and tool
outputs and errors, code interpreter code and outputs, shell and local-shell commands and output,
apply-patch operations, web/file search queries and results, computer actions, generated image
data. `fields` (RELAY_REDACT_FIELDS) names the item keys and logical kinds to redact.

Only tool data is touched: message text, reasoning, item types, ids, names and statuses stay,
and a redacted payload keeps its shape (every string inside becomes "[redacted]", numbers and
`type` discriminators stay), so a redacted log still replays into the same structure. The
upstream's error messages (an `error` event's, a Response's `error`) are masked as everywhere
else they are stored (streaming/masking.py): the configured keys, bearer tokens and `sk-` keys.
"""

from __future__ import annotations

from typing import Any

from ..streaming.masking import mask_error

REDACTED = "[redacted]"

DEFAULT_FIELDS = ("arguments", "input", "output", "outputs", "result", "results", "code", "commands",
                  "action", "queries", "operation", "error", "image")

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
    "response.shell_call_command.added": ("commands", ("command",)),
    "response.shell_call_command.delta": ("commands", ("delta",)),
    "response.shell_call_command.done": ("commands", ("command",)),
    "response.shell_call_output_content.delta": ("output", ("delta",)),
    "response.shell_call_output_content.done": ("output", ("output",)),
    "response.apply_patch_call_operation_diff.delta": ("operation", ("delta",)),
    "response.apply_patch_call_operation_diff.done": ("operation", ("diff", "delta")),
    "response.image_generation_call.partial_image": ("image", ("partial_image_b64",)),
}
# Item keys that hold a payload, per logical field (an item key is also its own field).
_ITEM_KEYS = {
    "image": ("result",),  # image_generation_call.result is base64 image data
}
_ITEM_EVENTS = frozenset({"response.output_item.added", "response.output_item.done"})
_RESPONSE_EVENTS = frozenset({
    "response.created", "response.queued", "response.in_progress",
    "response.completed", "response.failed", "response.incomplete",
})
_NOT_TOOLS = frozenset({"message", "reasoning", "compaction"})
# Kept inside a redacted payload: its structure, never its content.
_STRUCTURE = frozenset({"type", "id", "call_id", "status", "outcome", "exit_code", "index"})


# Every event type that may carry a payload or an error message: one set, so the raw event log
# tests each event once.
REDACTED_TYPES = frozenset(_STREAMED) | _ITEM_EVENTS | _RESPONSE_EVENTS | {"error"}


def needs_redaction(event_type: str) -> bool:
    return event_type in REDACTED_TYPES


def redact_event(event: dict[str, Any], fields: frozenset[str], secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """A copy of `event` with the listed tool fields replaced and its error message masked; the
    event itself is untouched."""
    event_type = event.get("type", "")
    if event_type == "error":  # the catalogue puts code and message at the top; the wire nests them
        nested = event.get("error")
        masked = mask_error(nested if isinstance(nested, dict) else event, secrets)
        if isinstance(nested, dict):
            return event if masked is nested else dict(event, error=masked)
        return masked  # type: ignore[no-any-return]
    streamed = _STREAMED.get(event_type)
    if streamed is not None:
        field, keys = streamed
        if field not in fields:
            return event
        return {k: (scrub(v) if k in keys else v) for k, v in event.items()}
    if event_type in _ITEM_EVENTS and isinstance(event.get("item"), dict):
        return dict(event, item=_redact_item(event["item"], fields))
    if event_type in _RESPONSE_EVENTS and isinstance(event.get("response"), dict):
        response = event["response"]
        output = response.get("output")
        if isinstance(output, list) and output:
            response = dict(response, output=[_redact_item(i, fields) for i in output])
        if response.get("error"):
            response = dict(response, error=mask_error(response["error"], secrets))
        if response is not event["response"]:
            return dict(event, response=response)
    return event


def scrub(value: Any) -> Any:
    """The same shape with every string replaced (empty strings and structure keys kept)."""
    if isinstance(value, str):
        return REDACTED if value else value
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, dict):
        return {k: (v if k in _STRUCTURE and not isinstance(v, (dict, list)) else scrub(v)) for k, v in value.items()}
    return value


def _item_keys(fields: frozenset[str]) -> frozenset[str]:
    keys = set(fields)
    for field in fields:
        keys.update(_ITEM_KEYS.get(field, ()))
    return frozenset(keys)


def _redact_item(item: Any, fields: frozenset[str]) -> Any:
    if not isinstance(item, dict) or item.get("type") in _NOT_TOOLS:
        return item
    keys = _item_keys(fields)
    return {k: (scrub(v) if k in keys and v not in (None, "", [], {}) else v) for k, v in item.items()}

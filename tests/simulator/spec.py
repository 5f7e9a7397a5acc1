"""The Open Responses specification's models (`openresponses-types`) as a test oracle.

Every event type the specification defines is validated with its model, and every Response object
with `ResponseResource`. The OpenAI hosted tools the simulator also plays (web search, file search,
code interpreter, image generation, MCP) are outside the specification: their items, events, tools
and `file_citation` annotations are named here, set aside, and everything around them is validated
as strictly as the rest.
"""

from __future__ import annotations

import copy
from enum import Enum
from typing import Any

import openresponses_types as spec
from pydantic import BaseModel

EXTENSION_ITEMS = frozenset({
    "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
    "mcp_list_tools", "mcp_call", "mcp_approval_request",
})
EXTENSION_EVENTS = frozenset({
    *(f"response.{kind}.{stage}" for kind in ("web_search_call", "file_search_call")
      for stage in ("in_progress", "searching", "completed")),
    *(f"response.code_interpreter_call.{stage}" for stage in ("in_progress", "interpreting", "completed")),
    "response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
    *(f"response.image_generation_call.{stage}"
      for stage in ("in_progress", "generating", "partial_image", "completed")),
    "response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
    "response.mcp_list_tools.failed", "response.mcp_call.in_progress", "response.mcp_call.completed",
    "response.mcp_call.failed", "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
})
EXTENSION_ANNOTATIONS = frozenset({"file_citation"})
EXTENSION_TOOLS = frozenset({"web_search", "file_search", "code_interpreter", "image_generation", "mcp"})


def _event_models() -> dict[str, type[BaseModel]]:
    models: dict[str, type[BaseModel]] = {}
    for name in dir(spec):
        cls = getattr(spec, name)
        if not (isinstance(cls, type) and issubclass(cls, BaseModel) and name.endswith("StreamingEvent")):
            continue
        kind = cls.model_fields["type"].annotation
        if isinstance(kind, type) and issubclass(kind, Enum):
            for member in kind:
                models[str(member.value)] = cls
    return models


EVENT_MODELS = _event_models()


class Extensions:
    """What was set aside as outside the specification, by kind."""

    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = {"item": set(), "event": set(), "annotation": set(), "tool": set()}

    def total(self) -> int:
        return sum(len(v) for v in self.seen.values())


def _strip(value: Any, found: Extensions) -> Any:
    """A copy of `value` without its extension items, annotations and tools (lists lose them;
    a lone `item` or `annotation` field becomes null, which the specification allows there)."""
    if isinstance(value, list):
        out = []
        for element in value:
            kind = element.get("type") if isinstance(element, dict) else None
            if kind in EXTENSION_ITEMS or kind in EXTENSION_ANNOTATIONS or kind in EXTENSION_TOOLS:
                found.seen["item" if kind in EXTENSION_ITEMS else
                           "annotation" if kind in EXTENSION_ANNOTATIONS else "tool"].add(kind)
                _check_extension(element)
                continue
            out.append(_strip(element, found))
        return out
    if isinstance(value, dict):
        out_dict: dict[str, Any] = {}
        for key, element in value.items():
            kind = element.get("type") if isinstance(element, dict) else None
            if key in ("item", "annotation") and (kind in EXTENSION_ITEMS or kind in EXTENSION_ANNOTATIONS):
                found.seen["item" if kind in EXTENSION_ITEMS else "annotation"].add(kind)
                _check_extension(element)
                out_dict[key] = None
            else:
                out_dict[key] = _strip(element, found)
        return out_dict
    return value


def _check_extension(element: dict[str, Any]) -> None:
    kind = element["type"]
    if kind in EXTENSION_ITEMS:
        assert isinstance(element.get("id"), str) and element["id"], element
    assert isinstance(kind, str)


def validate_response(obj: dict[str, Any], found: Extensions | None = None) -> None:
    """A Response object (any status) against the specification's ResponseResource."""
    spec.ResponseResource.model_validate(_strip(copy.deepcopy(obj), found or Extensions()))


def validate_event(event: dict[str, Any], found: Extensions | None = None) -> None:
    """One streamed event (SSE payload or WebSocket frame) against its model."""
    found = found or Extensions()
    kind = event["type"]
    model = EVENT_MODELS.get(kind)
    if model is None:
        assert kind in EXTENSION_EVENTS, f"{kind} is neither in the specification nor a known extension"
        assert isinstance(event["sequence_number"], int)
        found.seen["event"].add(kind)
        return
    model.model_validate(_strip(event, found))
    if "response" in event:
        validate_response(event["response"], found)


def validate_websocket_error(event: dict[str, Any]) -> None:
    spec.WebSocketErrorEvent.model_validate(event)


def sse_events(data: bytes) -> list[dict[str, Any]]:
    """The events of an SSE body, read as the compliance suite's parser reads them, and more
    strictly: every block names its type on an `event:` line, the same as its payload's `type`."""
    import json

    events = []
    for block in data.decode().split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        names = [line[len("event: "):] for line in lines if line.startswith("event: ")]
        payloads = [line[len("data: "):] for line in lines if line.startswith("data: ")]
        assert len(names) == 1 and len(payloads) == 1, f"one event: and one data: line per block: {block[:200]!r}"
        event = json.loads(payloads[0])
        assert names[0] == event["type"], f"event: {names[0]} announces a {event['type']}"
        events.append(event)
    return events

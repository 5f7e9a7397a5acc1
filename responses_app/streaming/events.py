"""Typed stream events of the OpenAI Responses API, and `parse_event` for one SSE `data` payload.

Contract: declarations plus one parser; imports only the standard library, orjson and the core's
own modules, never Django. `parse_event` returns the very dict orjson built, typed as
`StreamEvent`. It checks only that the payload is a JSON object whose `type` is a non-empty string
and whose `sequence_number`, when present, is an int. The TypedDicts (event_types.py, objects.py)
describe what real servers send (OpenAI, Azure, xAI, DeepSeek, LM Studio, Bedrock) but nothing
checks them at runtime: a consumer that indexes a field must still expect a KeyError from an
off-spec server. Unknown types are returned as they are; callers ask `is_known`. Because
`UnknownEvent.type` is any str, mypy narrows on `event["type"]` only within `KnownEvent`: after
`is_known(...)`, `cast(KnownEvent, event)`.

Every event type is named once, by its TypedDict in the `KnownEvent` union below;
`KNOWN_EVENT_TYPES` is derived from the union's `type` literals.
"""

from __future__ import annotations

from typing import NotRequired, TypeAlias, TypedDict, get_args, get_type_hints

import orjson

from .errors import MalformedEvent
from .event_types import (
    ResponseApplyPatchCallOperationDiffDeltaEvent,
    ResponseApplyPatchCallOperationDiffDoneEvent,
    ResponseAudioDeltaEvent,
    ResponseAudioDoneEvent,
    ResponseAudioTranscriptDeltaEvent,
    ResponseAudioTranscriptDoneEvent,
    ResponseCodeInterpreterCallCodeDeltaEvent,
    ResponseCodeInterpreterCallCodeDoneEvent,
    ResponseCodeInterpreterCallCompletedEvent,
    ResponseCodeInterpreterCallInProgressEvent,
    ResponseCodeInterpreterCallInterpretingEvent,
    ResponseCompactionCompactingEvent,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseCustomToolCallInputDeltaEvent,
    ResponseCustomToolCallInputDoneEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFileSearchCallCompletedEvent,
    ResponseFileSearchCallInProgressEvent,
    ResponseFileSearchCallSearchingEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseImageGenCallCompletedEvent,
    ResponseImageGenCallGeneratingEvent,
    ResponseImageGenCallInProgressEvent,
    ResponseImageGenCallPartialImageEvent,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseMcpCallArgumentsDeltaEvent,
    ResponseMcpCallArgumentsDoneEvent,
    ResponseMcpCallCompletedEvent,
    ResponseMcpCallFailedEvent,
    ResponseMcpCallInProgressEvent,
    ResponseMcpListToolsCompletedEvent,
    ResponseMcpListToolsFailedEvent,
    ResponseMcpListToolsInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputTextAnnotationAddedEvent,
    ResponseQueuedEvent,
    ResponseReasoningSummaryPartAddedEvent,
    ResponseReasoningSummaryPartDoneEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningSummaryTextDoneEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseReasoningTextDoneEvent,
    ResponseRefusalDeltaEvent,
    ResponseRefusalDoneEvent,
    ResponseShellCallCommandAddedEvent,
    ResponseShellCallCommandDeltaEvent,
    ResponseShellCallCommandDoneEvent,
    ResponseShellCallOutputContentDeltaEvent,
    ResponseShellCallOutputContentDoneEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseWebSearchCallCompletedEvent,
    ResponseWebSearchCallInProgressEvent,
    ResponseWebSearchCallSearchingEvent,
)
from .vocabulary import TERMINAL_EVENTS

# --- Unions and type sets -----------------------------------------------------------------------


class UnknownEvent(TypedDict):
    """An event whose `type` is not in KNOWN_EVENT_TYPES, passed through untouched."""

    type: str
    sequence_number: NotRequired[int]


KnownEvent: TypeAlias = (
    ResponseCreatedEvent
    | ResponseQueuedEvent
    | ResponseInProgressEvent
    | ResponseCompletedEvent
    | ResponseFailedEvent
    | ResponseIncompleteEvent
    | ResponseErrorEvent
    | ResponseOutputItemAddedEvent
    | ResponseOutputItemDoneEvent
    | ResponseContentPartAddedEvent
    | ResponseContentPartDoneEvent
    | ResponseTextDeltaEvent
    | ResponseTextDoneEvent
    | ResponseOutputTextAnnotationAddedEvent
    | ResponseRefusalDeltaEvent
    | ResponseRefusalDoneEvent
    | ResponseFunctionCallArgumentsDeltaEvent
    | ResponseFunctionCallArgumentsDoneEvent
    | ResponseMcpCallInProgressEvent
    | ResponseMcpCallArgumentsDeltaEvent
    | ResponseMcpCallArgumentsDoneEvent
    | ResponseMcpCallCompletedEvent
    | ResponseMcpCallFailedEvent
    | ResponseMcpListToolsInProgressEvent
    | ResponseMcpListToolsCompletedEvent
    | ResponseMcpListToolsFailedEvent
    | ResponseAudioDeltaEvent
    | ResponseAudioDoneEvent
    | ResponseAudioTranscriptDeltaEvent
    | ResponseAudioTranscriptDoneEvent
    | ResponseWebSearchCallInProgressEvent
    | ResponseWebSearchCallSearchingEvent
    | ResponseWebSearchCallCompletedEvent
    | ResponseFileSearchCallInProgressEvent
    | ResponseFileSearchCallSearchingEvent
    | ResponseFileSearchCallCompletedEvent
    | ResponseCodeInterpreterCallInProgressEvent
    | ResponseCodeInterpreterCallInterpretingEvent
    | ResponseCodeInterpreterCallCodeDeltaEvent
    | ResponseCodeInterpreterCallCodeDoneEvent
    | ResponseCodeInterpreterCallCompletedEvent
    | ResponseReasoningTextDeltaEvent
    | ResponseReasoningTextDoneEvent
    | ResponseReasoningSummaryPartAddedEvent
    | ResponseReasoningSummaryPartDoneEvent
    | ResponseReasoningSummaryTextDeltaEvent
    | ResponseReasoningSummaryTextDoneEvent
    | ResponseImageGenCallInProgressEvent
    | ResponseImageGenCallGeneratingEvent
    | ResponseImageGenCallPartialImageEvent
    | ResponseImageGenCallCompletedEvent
    | ResponseCustomToolCallInputDeltaEvent
    | ResponseCustomToolCallInputDoneEvent
    | ResponseShellCallCommandAddedEvent
    | ResponseShellCallCommandDeltaEvent
    | ResponseShellCallCommandDoneEvent
    | ResponseShellCallOutputContentDeltaEvent
    | ResponseShellCallOutputContentDoneEvent
    | ResponseApplyPatchCallOperationDiffDeltaEvent
    | ResponseApplyPatchCallOperationDiffDoneEvent
    | ResponseCompactionCompactingEvent
)

StreamEvent: TypeAlias = KnownEvent | UnknownEvent


def _literal_types(union: object) -> frozenset[str]:
    found: set[str] = set()
    for event_class in get_args(union):
        (literal,) = get_args(get_type_hints(event_class)["type"])
        found.add(literal)
    return frozenset(found)


# openai-python 3.x's 59 (which include `error` and compaction) plus the two apply-patch diff
# types typed from captures: 61.
KNOWN_EVENT_TYPES: frozenset[str] = _literal_types(KnownEvent)

TERMINAL_EVENT_TYPES: frozenset[str] = frozenset(TERMINAL_EVENTS)

LIFECYCLE_EVENT_TYPES: frozenset[str] = TERMINAL_EVENT_TYPES | {
    "response.created",
    "response.queued",
    "response.in_progress",
}


# --- Parsing ------------------------------------------------------------------------------------

_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError


def is_known(event_type: str) -> bool:
    return event_type in KNOWN_EVENT_TYPES


def parse_event(data: str | bytes) -> StreamEvent:
    """Decode one SSE `data` payload; raise MalformedEvent unless it is a JSON object with a
    non-empty string `type` and, if present, an integer `sequence_number`."""
    event: StreamEvent  # the same dict as `obj`, typed before the checks narrow `obj`
    try:
        obj = event = _loads(data)
    except _JSONDecodeError as exc:
        raise MalformedEvent(
            f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})", _text(data)
        ) from None
    # Exact type checks: orjson builds only plain dicts, ints and strs, and bool is an int subclass.
    if type(obj) is not dict:
        raise MalformedEvent(f"not a JSON object but {_json_kind(obj)}", _text(data))
    event_type = obj.get("type")
    if type(event_type) is not str:
        if event_type is None and "type" not in obj:
            raise MalformedEvent("missing string 'type'", _text(data))
        raise MalformedEvent(f"'type' is {_json_kind(event_type)}, not a string", _text(data))
    if not event_type:
        raise MalformedEvent("'type' is an empty string", _text(data))
    if type(obj.get("sequence_number", 0)) is not int:
        kind = _json_kind(obj["sequence_number"])
        raise MalformedEvent(f"'sequence_number' is {kind}, not an integer", _text(data))
    return event


def _text(data: str | bytes) -> str:
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"

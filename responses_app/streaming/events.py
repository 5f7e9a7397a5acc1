"""Typed stream events of the OpenAI Responses API, and `parse_event` for one SSE `data` payload.

Contract: declarations plus one parser; imports only the standard library, orjson and the core's
own modules, never Django. `parse_event` returns the very dict orjson built, typed as
`StreamEvent`. It checks that the payload is a JSON object whose `type` is a non-empty string, and
that each top-level field present whose annotation fixes a JSON type (an int index, a str id or
delta, an object, an array; `sequence_number` on every event) has that type: a delta that is a
number or an id that is an array is a malformed event, skipped and counted, not a TypeError in the
assembler that ends the request. The TypedDicts (event_types.py, objects.py) describe what real
servers send (OpenAI, Azure, xAI, DeepSeek, LM Studio, Bedrock); presence is not checked, nor
anything nested: a consumer that indexes a field must still expect a KeyError from an off-spec
server. Unknown types are returned as they are; callers ask `is_known`. Because
`UnknownEvent.type` is any str, mypy narrows on `event["type"]` only within `KnownEvent`: after
`is_known(...)`, `cast(KnownEvent, event)`.

Every event type is named once, by its TypedDict in the `KnownEvent` union below;
`KNOWN_EVENT_TYPES` is derived from the union's `type` literals (the keys of `_SHAPES`).

A lone surrogate escape (`"\\ud800"` with no low half: text some providers cut between the two
halves of a pair) is not JSON orjson reads; on that error only, the payload is read again by the
standard library's parser and each lone surrogate becomes U+FFFD: the rest of the delta stays.
"""

from __future__ import annotations

import json
import re
import types
from typing import Any, TypeAlias, Union, cast, get_args, get_origin, get_type_hints, is_typeddict

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
    UnknownEvent,
)
from .vocabulary import TERMINAL_EVENTS

# --- Unions and type sets -----------------------------------------------------------------------


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


# The Python types orjson builds for the JSON values a field's annotation admits (bool apart from int).
_SCALARS: dict[object, tuple[type, ...]] = {int: (int,), str: (str,), float: (int, float), bool: (bool,),
                                            type(None): (type(None),)}
_KINDS = {int: "an integer", float: "a number", str: "a string", bool: "a boolean", dict: "an object",
          list: "an array", type(None): "null"}


def _admits(hint: Any) -> tuple[type, ...] | None:
    """What a field's annotation admits at its top level; None: anything (Any, Literal, ...)."""
    origin = get_origin(hint)
    if hint in _SCALARS:
        return _SCALARS[hint]
    if is_typeddict(hint) or hint is dict or origin is dict:
        return (dict,)
    if hint is list or origin is list:
        return (list,)
    if origin is Union or origin is types.UnionType:
        parts = [_admits(arg) for arg in get_args(hint)]
        return None if any(part is None for part in parts) else tuple(t for part in parts if part for t in part)
    return None


def _shapes(union: object) -> dict[str, tuple[tuple[str, tuple[type, ...]], ...]]:
    """Per known type, the fields whose JSON type its TypedDict fixes, with what they admit."""
    shapes = {}
    for event_class in get_args(union):
        hints = get_type_hints(event_class)
        (literal,) = get_args(hints["type"])
        shapes[literal] = tuple((field, admitted) for field, hint in hints.items()
                                if field != "type" and (admitted := _admits(hint)) is not None)
    return shapes


# Checked by parse_event: a field of the wrong JSON type (an id that is an array, an index that is a
# string) is a malformed event, not a TypeError deep in the assembler that ends the request.
_SHAPES = _shapes(KnownEvent)

# openai-python 3.x's 59 (which include `error` and compaction) plus the two apply-patch diff
# types typed from captures: 61, each the `type` literal of one TypedDict of the union.
KNOWN_EVENT_TYPES: frozenset[str] = frozenset(_SHAPES)
_ABSENT = object()
_TEXT_DELTA = "response.output_text.delta"
_NO_LIST: list[Any] = []


def _plain_text_delta(obj: dict[str, Any]) -> bool:
    """`_SHAPES[_TEXT_DELTA]` checked field by field (a test holds the two equal): a quarter of the
    generic loop's instructions, on most of a stream's events. False: the loop says what is wrong."""
    return (type(obj.get("delta", "")) is str and type(obj.get("item_id", "")) is str
            and type(obj.get("output_index", 0)) is int and type(obj.get("content_index", 0)) is int
            and type(obj.get("sequence_number", 0)) is int and type(obj.get("logprobs", _NO_LIST)) is list
            and type(obj.get("obfuscation", "")) is str)


_UNKNOWN_SHAPE: tuple[tuple[str, tuple[type, ...]], ...] = (("sequence_number", (int,)),)  # UnknownEvent's

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
    non-empty string `type` whose fields, where its TypedDict fixes their JSON type, have it."""
    try:
        obj = _loads(data)
    except _JSONDecodeError as exc:
        obj = _loads_with_lone_surrogates(data, exc)
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
    if event_type == _TEXT_DELTA and _plain_text_delta(obj):
        return cast(StreamEvent, obj)  # most events of a stream: its shape, checked without a loop
    for field, admitted in _SHAPES.get(event_type, _UNKNOWN_SHAPE):
        value = obj.get(field, _ABSENT)
        if value is not _ABSENT and type(value) not in admitted:
            expected = " or ".join(_KINDS[t] for t in admitted if t is not int or float not in admitted)
            raise MalformedEvent(f"'{field}' is {_json_kind(value)}, not {expected}", _text(data))
    return cast(StreamEvent, obj)


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")  # the escapes are the pattern's: mypyc takes no surrogate literal


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads_with_lone_surrogates(data: str | bytes, error: orjson.JSONDecodeError) -> Any:
    """The payload orjson refused for a lone surrogate, read by `json` (which keeps one as is;
    NaN and Infinity refused as orjson does), each lone surrogate then U+FFFD. Any other error is
    the payload's: MalformedEvent with orjson's words."""
    if "surrogate" in error.msg:
        try:
            return _without_surrogates(json.loads(data, parse_constant=_no_constant))
        except (ValueError, RecursionError):
            pass
    raise MalformedEvent(f"invalid JSON ({error.msg} at line {error.lineno} column {error.colno})", _text(data))


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_surrogates(key): _without_surrogates(item) for key, item in value.items()}
    return value


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

"""Typed stream events of the OpenAI Responses API, and `parse_event` for one SSE `data` payload.

Contract: declarations plus one parser; imports only the standard library, orjson and `.errors`,
never Django. `parse_event` returns the very dict orjson built, typed as `StreamEvent`. It checks
only that the payload is a JSON object whose `type` is a non-empty string and whose
`sequence_number`, when present, is an int. The TypedDicts describe what real servers send
(OpenAI, Azure, xAI, DeepSeek, LM Studio, Bedrock) but nothing checks them at runtime: a consumer
that indexes a field must still expect a KeyError from an off-spec server. Unknown types are
returned as they are; callers ask `is_known`. Because `UnknownEvent.type` is any str, mypy narrows
on `event["type"]` only within `KnownEvent`: after `is_known(...)`, `cast(KnownEvent, event)`.

Field names and optionality follow openai-python's `types/responses/response_*_event.py`, loosened
(`NotRequired`) where real captures omit a field. The shell and apply-patch events are newer than
that SDK and are typed from captures.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypeAlias, TypedDict

import orjson

from .errors import MalformedEvent

# --- Shared nested shapes -----------------------------------------------------------------------


class TopLogprob(TypedDict, total=False):
    token: str | None
    logprob: float | None
    bytes: list[int]


class Logprob(TypedDict):
    token: str
    logprob: float
    bytes: NotRequired[list[int]]
    top_logprobs: NotRequired[list[TopLogprob] | None]


class FileCitation(TypedDict):
    type: Literal["file_citation"]
    file_id: str
    filename: str
    index: int


class UrlCitation(TypedDict):
    type: Literal["url_citation"]
    url: str
    # xAI sends bare {"type", "url"} citations.
    start_index: NotRequired[int]
    end_index: NotRequired[int]
    title: NotRequired[str]


class ContainerFileCitation(TypedDict):
    type: Literal["container_file_citation"]
    container_id: str
    file_id: str
    filename: str
    start_index: int
    end_index: int


class FilePath(TypedDict):
    type: Literal["file_path"]
    file_id: str
    index: int


Annotation: TypeAlias = FileCitation | UrlCitation | ContainerFileCitation | FilePath


class OutputTextPart(TypedDict):
    type: Literal["output_text"]
    text: str
    annotations: list[Annotation]
    logprobs: NotRequired[list[Logprob]]


class RefusalPart(TypedDict):
    type: Literal["refusal"]
    refusal: str


class ReasoningTextPart(TypedDict):
    type: Literal["reasoning_text"]
    text: str


class SummaryTextPart(TypedDict):
    type: Literal["summary_text"]
    text: str


ContentPart: TypeAlias = OutputTextPart | RefusalPart | ReasoningTextPart


class OutputItem(TypedDict, total=False):
    """Any of the ~30 output item kinds: message, reasoning, function_call, mcp_call, shell_call...

    One flat shape: only `type` is always present; which other keys appear depends on it.
    """

    type: Required[str]
    id: str
    status: str
    role: str
    phase: str
    content: list[ContentPart]
    summary: list[SummaryTextPart]
    encrypted_content: str | None
    call_id: str | None
    name: str
    namespace: str
    arguments: Any  # a JSON string for function/MCP calls, an object for tool_search_call
    input: str
    output: Any  # a string for MCP/function outputs, a list for shell outputs
    error: Any
    server_label: str
    approval_request_id: str | None
    tools: list[dict[str, Any]]
    action: dict[str, Any]
    code: str | None
    container_id: str
    outputs: list[dict[str, Any]] | None
    queries: list[str]
    results: list[dict[str, Any]] | None
    result: str | None
    operation: dict[str, Any]
    environment: dict[str, Any]


class ResponseError(TypedDict, total=False):
    code: str
    message: str


class Usage(TypedDict, total=False):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens_details: dict[str, int]


class Response(TypedDict, total=False):
    id: Required[str]
    object: Required[str]  # "response"
    created_at: Required[float]
    status: Required[str]  # queued | in_progress | completed | failed | incomplete | cancelled
    model: Required[str]
    output: Required[list[OutputItem]]
    error: ResponseError | None
    incomplete_details: dict[str, Any] | None  # {"reason": ...}; xAI says "REASON_MAX_LEN"
    usage: Usage | None
    instructions: Any
    metadata: dict[str, str] | None
    previous_response_id: str | None
    background: bool | None
    completed_at: float | None
    parallel_tool_calls: bool
    tools: list[dict[str, Any]]
    tool_choice: Any
    text: dict[str, Any]
    reasoning: dict[str, Any] | None
    temperature: float | None
    top_p: float | None
    max_output_tokens: int | None
    service_tier: str | None
    truncation: str | None
    store: bool
    user: str | None


class ErrorDetail(TypedDict, total=False):
    type: str
    code: str | int | None
    message: str
    param: str | None


# --- Bases (never on the wire by themselves) ----------------------------------------------------


class _Event(TypedDict):
    sequence_number: NotRequired[int]  # absent in early-2025 streams


class _ResponseEvent(_Event):
    response: Response


class _ItemEvent(_Event):
    item_id: str
    output_index: int


class _ContentEvent(_ItemEvent):
    content_index: int


class _SummaryEvent(_ItemEvent):
    summary_index: int


# --- Lifecycle ----------------------------------------------------------------------------------


class ResponseCreatedEvent(_ResponseEvent):
    type: Literal["response.created"]


class ResponseQueuedEvent(_ResponseEvent):
    type: Literal["response.queued"]


class ResponseInProgressEvent(_ResponseEvent):
    type: Literal["response.in_progress"]


class ResponseCompletedEvent(_ResponseEvent):
    type: Literal["response.completed"]


class ResponseFailedEvent(_ResponseEvent):
    type: Literal["response.failed"]


class ResponseIncompleteEvent(_ResponseEvent):
    type: Literal["response.incomplete"]


class ResponseErrorEvent(_Event):
    """The SDK puts code/message/param at the top; OpenAI's wire nests them under `error`."""

    type: Literal["error"]
    code: NotRequired[str | None]
    message: NotRequired[str]
    param: NotRequired[str | None]
    error: NotRequired[ErrorDetail]


# --- Output items and content parts -------------------------------------------------------------


class ResponseOutputItemAddedEvent(_Event):
    type: Literal["response.output_item.added"]
    output_index: int
    item: OutputItem


class ResponseOutputItemDoneEvent(_Event):
    type: Literal["response.output_item.done"]
    output_index: int
    item: OutputItem


class ResponseContentPartAddedEvent(_ContentEvent):
    type: Literal["response.content_part.added"]
    part: ContentPart


class ResponseContentPartDoneEvent(_ContentEvent):
    type: Literal["response.content_part.done"]
    part: ContentPart


# --- Text ---------------------------------------------------------------------------------------


class ResponseTextDeltaEvent(_ContentEvent):
    type: Literal["response.output_text.delta"]
    delta: str
    logprobs: NotRequired[list[Logprob]]
    obfuscation: NotRequired[str]


class ResponseTextDoneEvent(_ContentEvent):
    type: Literal["response.output_text.done"]
    text: str
    logprobs: NotRequired[list[Logprob]]


class ResponseOutputTextAnnotationAddedEvent(_ContentEvent):
    type: Literal["response.output_text.annotation.added"]
    annotation_index: int
    annotation: Annotation


# --- Refusal ------------------------------------------------------------------------------------


class ResponseRefusalDeltaEvent(_ContentEvent):
    type: Literal["response.refusal.delta"]
    delta: str
    obfuscation: NotRequired[str]


class ResponseRefusalDoneEvent(_ContentEvent):
    type: Literal["response.refusal.done"]
    refusal: str


# --- Function calls -----------------------------------------------------------------------------


class ResponseFunctionCallArgumentsDeltaEvent(_ItemEvent):
    type: Literal["response.function_call_arguments.delta"]
    delta: str
    obfuscation: NotRequired[str]


class ResponseFunctionCallArgumentsDoneEvent(_ItemEvent):
    type: Literal["response.function_call_arguments.done"]
    arguments: str
    name: NotRequired[str]  # in the SDK, but no captured server sends it: the item has it


# --- MCP ----------------------------------------------------------------------------------------


class ResponseMcpCallInProgressEvent(_ItemEvent):
    type: Literal["response.mcp_call.in_progress"]


class ResponseMcpCallArgumentsDeltaEvent(_ItemEvent):
    type: Literal["response.mcp_call_arguments.delta"]
    delta: str
    obfuscation: NotRequired[str]


class ResponseMcpCallArgumentsDoneEvent(_ItemEvent):
    type: Literal["response.mcp_call_arguments.done"]
    arguments: str


class ResponseMcpCallCompletedEvent(_ItemEvent):
    type: Literal["response.mcp_call.completed"]


class ResponseMcpCallFailedEvent(_ItemEvent):
    type: Literal["response.mcp_call.failed"]


class ResponseMcpListToolsInProgressEvent(_ItemEvent):
    type: Literal["response.mcp_list_tools.in_progress"]


class ResponseMcpListToolsCompletedEvent(_ItemEvent):
    type: Literal["response.mcp_list_tools.completed"]


class ResponseMcpListToolsFailedEvent(_ItemEvent):
    type: Literal["response.mcp_list_tools.failed"]


# --- Audio (not tied to an item) ----------------------------------------------------------------


class ResponseAudioDeltaEvent(_Event):
    type: Literal["response.audio.delta"]
    delta: str  # base64 audio bytes


class ResponseAudioDoneEvent(_Event):
    type: Literal["response.audio.done"]


class ResponseAudioTranscriptDeltaEvent(_Event):
    type: Literal["response.audio.transcript.delta"]
    delta: str


class ResponseAudioTranscriptDoneEvent(_Event):
    type: Literal["response.audio.transcript.done"]


# --- Web search ---------------------------------------------------------------------------------


class ResponseWebSearchCallInProgressEvent(_ItemEvent):
    type: Literal["response.web_search_call.in_progress"]


class ResponseWebSearchCallSearchingEvent(_ItemEvent):
    type: Literal["response.web_search_call.searching"]


class ResponseWebSearchCallCompletedEvent(_ItemEvent):
    type: Literal["response.web_search_call.completed"]


# --- File search --------------------------------------------------------------------------------


class ResponseFileSearchCallInProgressEvent(_ItemEvent):
    type: Literal["response.file_search_call.in_progress"]


class ResponseFileSearchCallSearchingEvent(_ItemEvent):
    type: Literal["response.file_search_call.searching"]


class ResponseFileSearchCallCompletedEvent(_ItemEvent):
    type: Literal["response.file_search_call.completed"]


# --- Code interpreter ---------------------------------------------------------------------------


class ResponseCodeInterpreterCallInProgressEvent(_ItemEvent):
    type: Literal["response.code_interpreter_call.in_progress"]


class ResponseCodeInterpreterCallInterpretingEvent(_ItemEvent):
    type: Literal["response.code_interpreter_call.interpreting"]


class ResponseCodeInterpreterCallCodeDeltaEvent(_ItemEvent):
    type: Literal["response.code_interpreter_call_code.delta"]
    delta: str
    obfuscation: NotRequired[str]


class ResponseCodeInterpreterCallCodeDoneEvent(_ItemEvent):
    type: Literal["response.code_interpreter_call_code.done"]
    code: str


class ResponseCodeInterpreterCallCompletedEvent(_ItemEvent):
    type: Literal["response.code_interpreter_call.completed"]


# --- Reasoning ----------------------------------------------------------------------------------


class ResponseReasoningTextDeltaEvent(_ContentEvent):
    type: Literal["response.reasoning_text.delta"]
    delta: str
    obfuscation: NotRequired[str]


class ResponseReasoningTextDoneEvent(_ContentEvent):
    type: Literal["response.reasoning_text.done"]
    text: str


class ResponseReasoningSummaryPartAddedEvent(_SummaryEvent):
    type: Literal["response.reasoning_summary_part.added"]
    part: SummaryTextPart


class ResponseReasoningSummaryPartDoneEvent(_SummaryEvent):
    type: Literal["response.reasoning_summary_part.done"]
    part: SummaryTextPart


class ResponseReasoningSummaryTextDeltaEvent(_SummaryEvent):
    type: Literal["response.reasoning_summary_text.delta"]
    delta: str
    obfuscation: NotRequired[str]


class ResponseReasoningSummaryTextDoneEvent(_SummaryEvent):
    type: Literal["response.reasoning_summary_text.done"]
    text: str


# --- Image generation ---------------------------------------------------------------------------


class ResponseImageGenCallInProgressEvent(_ItemEvent):
    type: Literal["response.image_generation_call.in_progress"]


class ResponseImageGenCallGeneratingEvent(_ItemEvent):
    type: Literal["response.image_generation_call.generating"]


class ResponseImageGenCallPartialImageEvent(_ItemEvent):
    type: Literal["response.image_generation_call.partial_image"]
    partial_image_b64: str
    partial_image_index: int  # 0-based
    # Sent by OpenAI, absent from the SDK.
    size: NotRequired[str]
    quality: NotRequired[str]
    background: NotRequired[str]
    output_format: NotRequired[str]


class ResponseImageGenCallCompletedEvent(_ItemEvent):
    type: Literal["response.image_generation_call.completed"]


# --- Custom tool calls --------------------------------------------------------------------------


class ResponseCustomToolCallInputDeltaEvent(_ItemEvent):
    type: Literal["response.custom_tool_call_input.delta"]
    delta: str
    obfuscation: NotRequired[str]


class ResponseCustomToolCallInputDoneEvent(_ItemEvent):
    type: Literal["response.custom_tool_call_input.done"]
    input: str


# --- Hosted shell and apply-patch (typed from captures) -----------------------------------------


class _ShellCommandEvent(_Event):
    # No item_id: the command belongs to the shell_call item at output_index.
    output_index: int
    command_index: int


class ResponseShellCallCommandAddedEvent(_ShellCommandEvent):
    type: Literal["response.shell_call_command.added"]
    command: str


class ResponseShellCallCommandDeltaEvent(_ShellCommandEvent):
    type: Literal["response.shell_call_command.delta"]
    delta: str
    obfuscation: NotRequired[str]


class ResponseShellCallCommandDoneEvent(_ShellCommandEvent):
    type: Literal["response.shell_call_command.done"]
    command: str


class ShellOutputDelta(TypedDict, total=False):
    stdout: str
    stderr: str


class ShellCommandOutput(TypedDict, total=False):
    stdout: str
    stderr: str
    outcome: dict[str, Any]  # {"type": "exit", "exit_code": 0} or {"type": "timeout"}


class ResponseShellCallOutputContentDeltaEvent(_ItemEvent):
    type: Literal["response.shell_call_output_content.delta"]
    command_index: int
    delta: ShellOutputDelta  # an object, unlike every other delta


class ResponseShellCallOutputContentDoneEvent(_ItemEvent):
    type: Literal["response.shell_call_output_content.done"]
    command_index: int
    output: list[ShellCommandOutput]


class ResponseApplyPatchCallOperationDiffDeltaEvent(_ItemEvent):
    type: Literal["response.apply_patch_call_operation_diff.delta"]
    delta: str
    obfuscation: NotRequired[str]


class ResponseApplyPatchCallOperationDiffDoneEvent(_ItemEvent):
    type: Literal["response.apply_patch_call_operation_diff.done"]
    diff: str


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
)

StreamEvent: TypeAlias = KnownEvent | UnknownEvent

TERMINAL_EVENT_TYPES: frozenset[str] = frozenset(
    {"response.completed", "response.failed", "response.incomplete"}
)

LIFECYCLE_EVENT_TYPES: frozenset[str] = TERMINAL_EVENT_TYPES | {
    "response.created",
    "response.queued",
    "response.in_progress",
}

# The SDK's 53 (which include `error`) plus the 7 newer shell/apply-patch types: 60.
KNOWN_EVENT_TYPES: frozenset[str] = LIFECYCLE_EVENT_TYPES | {
    "error",
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.output_text.annotation.added",
    "response.refusal.delta",
    "response.refusal.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.mcp_call.in_progress",
    "response.mcp_call_arguments.delta",
    "response.mcp_call_arguments.done",
    "response.mcp_call.completed",
    "response.mcp_call.failed",
    "response.mcp_list_tools.in_progress",
    "response.mcp_list_tools.completed",
    "response.mcp_list_tools.failed",
    "response.audio.delta",
    "response.audio.done",
    "response.audio.transcript.delta",
    "response.audio.transcript.done",
    "response.web_search_call.in_progress",
    "response.web_search_call.searching",
    "response.web_search_call.completed",
    "response.file_search_call.in_progress",
    "response.file_search_call.searching",
    "response.file_search_call.completed",
    "response.code_interpreter_call.in_progress",
    "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call_code.delta",
    "response.code_interpreter_call_code.done",
    "response.code_interpreter_call.completed",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.image_generation_call.in_progress",
    "response.image_generation_call.generating",
    "response.image_generation_call.partial_image",
    "response.image_generation_call.completed",
    "response.custom_tool_call_input.delta",
    "response.custom_tool_call_input.done",
    "response.shell_call_command.added",
    "response.shell_call_command.delta",
    "response.shell_call_command.done",
    "response.shell_call_output_content.delta",
    "response.shell_call_output_content.done",
    "response.apply_patch_call_operation_diff.delta",
    "response.apply_patch_call_operation_diff.done",
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

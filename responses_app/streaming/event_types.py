"""One TypedDict per stream event type of the Responses API (see events.py for the union, the set
of known types derived from it, and the parser).

Field names and optionality follow openai-python's `types/responses/response_*_event.py`, loosened
(`NotRequired`) where real captures omit a field. The shell and apply-patch events are newer than
that SDK and are typed from captures. Pure: the standard library only.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from .objects import (
    Annotation,
    ContentPart,
    ErrorDetail,
    Logprob,
    OutputItem,
    Response,
    SummaryTextPart,
)

# --- Bases (never on the wire by themselves) ----------------------------------------------------


class _Event(TypedDict):
    sequence_number: NotRequired[int]  # absent in older API versions' streams


class _ResponseEvent(_Event):
    response: Response


class _ItemEvent(_Event):
    item_id: str
    output_index: int


class _ContentEvent(_ItemEvent):
    content_index: int


class _SummaryEvent(_ItemEvent):
    summary_index: int


class UnknownEvent(TypedDict):
    """An event whose `type` is not in KNOWN_EVENT_TYPES (events.py), passed through untouched."""

    type: str
    sequence_number: NotRequired[int]


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


# --- Compaction (openai-python 3.x) -------------------------------------------------------------


class ResponseCompactionCompactingEvent(_ItemEvent):
    """Summary content is being sampled for a compaction item; carries no content itself."""

    type: Literal["response.compaction.compacting"]

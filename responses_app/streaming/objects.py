"""The Responses API objects that stream events carry: Response, output items, content parts,
annotations, logprobs, usage, errors. Declarations only, typed after openai-python's
`types/responses/` and loosened where real captures omit a field; nothing checks them at runtime.

Pure: the standard library only.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypeAlias, TypedDict


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

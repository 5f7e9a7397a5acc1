"""The view's schema: every field a block or the meta can hold, and what it may carry.

A view reaches every viewer's frames, the checkpoints, the JSON API and the server-rendered page,
so each field of each TypedDict below is classified by its annotation's metadata:

- `Gated(kind)`: text the model or a tool wrote, or the upstream quotes (an error's message): the
  safety gate (gate.py) shows it under buffered/progressive only as far as it passed a check of
  that checker kind (output | tool_arguments | tool_output);
- `SAFE_ID`: an identifier the provider or the relay made (a response, item, call or block id);
- `SAFE_ENUM`: a word of a set the API or the relay defines (a kind, a state, a status, a tool type);
- `SAFE_NUMBER`: numbers only (token counts, an index);
- `IMAGE_DATA`: an image (base64), which no text checker can judge.

The gate gates exactly the `Gated` fields of a block's kind (`gated_fields`); a test walks these
TypedDicts (a field without a class fails it) and every view the assembler makes of real and
hostile streams (a field missing here fails it). Declarations only, read by introspection: kept
interpreted (native.py), like event_types.py.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict, get_type_hints


class Gated:
    """Text judged before it is shown, as a checker's `kind`."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"Gated({self.kind!r})"


class Safe:
    """Never model-controlled text, and why."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"Safe({self.why!r})"


OUTPUT = Gated("output")
ARGUMENTS = Gated("tool_arguments")  # what the model wrote for a tool
TOOL_OUTPUT = Gated("tool_output")  # what the tool answered
SAFE_ID = Safe("an identifier the provider or the relay made")
SAFE_ENUM = Safe("a word of a set the API or the relay defines")
SAFE_NUMBER = Safe("numbers only")
IMAGE_DATA = Safe("image data, which no text checker judges")


class PartBlock(TypedDict, total=False):
    """A content part (answer text, a refusal), a reasoning item or summary part, the audio transcript."""

    id: Annotated[str, SAFE_ID]
    kind: Annotated[str, SAFE_ENUM]  # text | refusal | reasoning | audio
    item_id: Annotated[str | None, SAFE_ID]
    tool: Annotated[str, SAFE_ENUM]  # a reasoning item's block: "reasoning"
    state: Annotated[str, SAFE_ENUM]
    text: Annotated[str, OUTPUT]
    annotations: Annotated[list[Any], OUTPUT]  # citations: a page's title and URL, a file's name


class _ItemFields(TypedDict, total=False):
    """What every output item's block may hold (projection.tool_fields copies them from the item)."""

    id: Annotated[str, SAFE_ID]
    kind: Annotated[str, SAFE_ENUM]  # tool | compaction | image
    item_id: Annotated[str | None, SAFE_ID]
    tool: Annotated[str, SAFE_ENUM]  # the item's type
    state: Annotated[str, SAFE_ENUM]
    call_id: Annotated[str, SAFE_ID]
    approval_request_id: Annotated[str, SAFE_ID]
    container_id: Annotated[str, SAFE_ID]
    block_id: Annotated[str, SAFE_ID]  # the safety notice: the block whose text it stopped
    name: Annotated[str, ARGUMENTS]  # the tool the model called: part of the block's title
    server_label: Annotated[str, ARGUMENTS]  # an MCP server's label: the title too
    arguments: Annotated[str, ARGUMENTS]
    input: Annotated[str, ARGUMENTS]
    query: Annotated[str, ARGUMENTS]
    queries: Annotated[list[Any], ARGUMENTS]
    commands: Annotated[list[Any], ARGUMENTS]
    operation: Annotated[dict[str, Any], ARGUMENTS]
    output: Annotated[Any, TOOL_OUTPUT]
    outputs: Annotated[list[Any], TOOL_OUTPUT]
    error: Annotated[Any, TOOL_OUTPUT]
    text: Annotated[str, ARGUMENTS]  # a code interpreter's code (every block has a text, most an empty one)


class ItemBlock(_ItemFields, total=False):
    """A tool call (function, custom, MCP, search, code interpreter, shell, patch ...), a compaction
    item, and the safety notice that stands where text was stopped (tool "content_filter")."""

    result: Annotated[Any, TOOL_OUTPUT]


class ImageBlock(_ItemFields, total=False):
    """An image generation call: the image itself, partial images while it is made."""

    partial_index: Annotated[int, SAFE_NUMBER]
    image_b64: Annotated[str, IMAGE_DATA]
    result: Annotated[str, IMAGE_DATA]


class Meta(TypedDict, total=False):
    """The view's meta: the response as a whole."""

    response_id: Annotated[str | None, SAFE_ID]
    status: Annotated[str | None, SAFE_ENUM]
    model: Annotated[str | None, SAFE_ID]  # the model's name, as the provider reports it
    activity: Annotated[str, SAFE_ENUM]  # text | reasoning | tool | approval
    usage: Annotated[dict[str, Any] | None, SAFE_NUMBER]
    # As the upstream words them; the relay's own outcome (Transcript.end: a transport error, the
    # deadline, the safety policy's stop) is the relay's words, written as it is.
    error: Annotated[dict[str, Any] | None, OUTPUT]  # a failed response's error: its message may quote anything
    incomplete_reason: Annotated[str | None, OUTPUT]


BLOCK_SCHEMAS: dict[str, type] = {"text": PartBlock, "refusal": PartBlock, "reasoning": PartBlock,
                                  "audio": PartBlock, "image": ImageBlock}
META = "meta"  # the gate's name for the meta, where a block id would be


def schema_for(kind: str) -> type:
    """The TypedDict of a block of this kind (the meta's for META)."""
    if kind == META:
        return Meta
    return BLOCK_SCHEMAS.get(kind, ItemBlock)


def classes(schema: type) -> dict[str, Gated | Safe]:
    """Each field of a schema TypedDict and its class."""
    out: dict[str, Gated | Safe] = {}
    for name, hint in get_type_hints(schema, include_extras=True).items():
        marks = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Gated | Safe)]
        if len(marks) != 1:
            raise TypeError(f"{schema.__name__}.{name} needs one class (Gated or Safe), has {marks}")
        out[name] = marks[0]
    return out


def gated_fields(kind: str) -> dict[str, str]:
    """The gated fields of a block of this kind (or of the meta), each with its checker kind."""
    return _GATED[kind] if kind in _GATED else _GATED[""]


def safe_fields(kind: str) -> frozenset[str]:
    """The fields of a block of this kind (or of the meta) proven never to carry such text."""
    return _SAFE[kind] if kind in _SAFE else _SAFE[""]


def checker_kind(kind: str, name: str) -> str:
    """How a checker judges this field: as the block's schema says, else as any schema says of a
    field of that name, else as what the model wrote (output in a text block, a tool's arguments)."""
    found = gated_fields(kind).get(name) or _ANY_GATED.get(name)
    if found is not None:
        return found
    return OUTPUT.kind if schema_for(kind) is PartBlock else ARGUMENTS.kind


_KINDS = (*BLOCK_SCHEMAS, META, "")
_GATED: dict[str, dict[str, str]] = {
    kind: {name: mark.kind for name, mark in classes(schema_for(kind)).items() if isinstance(mark, Gated)}
    for kind in _KINDS
}
_SAFE: dict[str, frozenset[str]] = {
    kind: frozenset(name for name, mark in classes(schema_for(kind)).items() if isinstance(mark, Safe))
    for kind in _KINDS
}
_ANY_GATED: dict[str, str] = {name: found for kind in (META, "text", "") for name, found in _GATED[kind].items()}

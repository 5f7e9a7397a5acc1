"""How assembled items appear in the view: one block per content part, per reasoning summary
part and per tool call, with block ids derived from the item's place (`<prefix>o<index>` for an
item, `-c<n>` / `-s<n>` for its content and summary parts).

The assembler calls these after every structural change; they emit view ops only for what
actually changed (`ViewModel.set` compares). Pure: no Django, no I/O.
"""

from __future__ import annotations

from typing import Any

from .items import Item, Part
from .view import ViewModel

# A compaction item is stored in the snapshot and shown as a notice, never as text: its content
# is encrypted context for the model.
BLOCK_KINDS = {"message": "message", "reasoning": "reasoning", "image_generation_call": "image",
               "compaction": "compaction"}

# Fields of a tool item worth showing, copied into its block when present.
_TOOL_FIELDS = (
    "name", "call_id", "server_label", "arguments", "input", "queries", "output", "error",
    "approval_request_id", "result", "container_id",
)


def item_block_id(item: Item) -> str:
    return f"{item.prefix}o{item.index}"


def part_block_id(item: Item, index: int, summary: bool) -> str:
    return f"{item.prefix}o{item.index}-{'s' if summary else 'c'}{index}"


def block_kind(item: Item) -> str:
    return BLOCK_KINDS.get(item.type, "tool")


def tool_fields(data: dict[str, Any]) -> dict[str, Any]:
    fields = {key: data[key] for key in _TOOL_FIELDS if data.get(key) not in (None, "", [])}
    action = data.get("action")
    if isinstance(action, dict):
        if action.get("query"):
            fields["query"] = action["query"]
        if action.get("commands"):
            fields["commands"] = action["commands"]
        if isinstance(action.get("command"), list) and action["command"]:
            fields["commands"] = [" ".join(map(str, action["command"]))]
    operation = data.get("operation")
    if isinstance(operation, dict):
        fields["operation"] = {k: operation.get(k) for k in ("type", "path", "diff")}
    if data.get("type") == "code_interpreter_call":
        fields.pop("output", None)
        outputs = data.get("outputs")
        if outputs:
            fields["outputs"] = outputs
    return fields


def add_item_block(view: ViewModel, item: Item) -> None:
    kind = block_kind(item)
    if kind == "message":
        for index in sorted(item.parts):
            add_part_block(view, item, index, item.parts[index])
        return
    block: dict[str, Any] = {
        "id": item_block_id(item), "kind": kind, "item_id": item.id, "tool": item.type,
        "state": item.data.get("status") or "in_progress",
    }
    block.update(tool_fields(item.materialize()))
    view.add(block)
    if kind == "reasoning":
        for index in sorted(item.summary):
            add_part_block(view, item, index, item.summary[index], summary=True)


def add_part_block(view: ViewModel, item: Item, index: int, part: Part, *, summary: bool = False) -> None:
    block_id = part_block_id(item, index, summary)
    if view.has(block_id):
        return
    kind = "reasoning" if summary or part.data.get("type") == "reasoning_text" else (
        "refusal" if part.field == "refusal" else "text")
    block: dict[str, Any] = {
        "id": block_id, "kind": kind, "item_id": item.id, "state": "streaming",
        "text": part.text.value,
    }
    if kind == "text":
        block["annotations"] = list(part.data.get("annotations") or [])
    view.add(block)


def sync_part(view: ViewModel, item: Item, index: int, part: Part, summary: bool, *, done: bool) -> None:
    block_id = part_block_id(item, index, summary)
    if not view.has(block_id):
        add_part_block(view, item, index, part, summary=summary)
    fields: dict[str, Any] = {"text": part.text.value}
    if done:
        fields["state"] = "done"
    if "annotations" in part.data:
        fields["annotations"] = list(part.data["annotations"] or [])
    view.set(block_id, fields)


def sync_item(view: ViewModel, item: Item) -> None:
    """Bring the item's blocks in line with its (final) state."""
    for index in sorted(item.parts):
        sync_part(view, item, index, item.parts[index], False, done=item.done)
    for index in sorted(item.summary):
        sync_part(view, item, index, item.summary[index], True, done=item.done)
    if block_kind(item) == "message":
        return
    block_id = item_block_id(item)
    if not view.has(block_id):
        add_item_block(view, item)
    data = item.materialize()
    fields = tool_fields(data)
    if item.done:
        fields["state"] = data.get("status") or "completed"
    if item.type == "code_interpreter_call" and isinstance(data.get("code"), str):
        fields["text"] = data["code"]
    view.set(block_id, fields)

"""Output items and their parts: the half of the assembler that keeps per-item state.

`ItemEvents` is a base of `Assembler`: it owns the items (by output index and by item id), finds
the item or part an event addresses (repairing, and recording an anomaly, when the stream skipped
an `added` event), and handles every item-, part- and tool-level event. Sequencing, the text
path and the response lifecycle live in assembler.py.

A response holds at most `max_items` output items and as many content and summary parts (each is
a view block): what would pass that bound raises `OverLimit` where it would be added, the event is
dropped, and `limited` says so, so a hostile upstream costs bounded memory and linear time.
Streamed text is bounded the same way: `room` characters of deltas (every kind: answer, reasoning,
arguments, commands) are kept, the rest of the delta that passes it is cut and later ones dropped,
and `limited` says so with `limit_reason` "max_answer_chars".

Pure: no Django, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .items import PART_TEXT_FIELD, Item, Part
from .projection import add_item_block, add_part_block, item_block_id, part_block_id, sync_item, sync_part
from .view import ViewModel

# Tool-ish item events that only move a state: event type -> state shown to people.
STATE_EVENTS = {
    "response.web_search_call.in_progress": "in_progress",
    "response.web_search_call.searching": "searching",
    "response.web_search_call.completed": "completed",
    "response.file_search_call.in_progress": "in_progress",
    "response.file_search_call.searching": "searching",
    "response.file_search_call.completed": "completed",
    "response.code_interpreter_call.in_progress": "in_progress",
    "response.code_interpreter_call.interpreting": "interpreting",
    "response.code_interpreter_call.completed": "completed",
    "response.image_generation_call.in_progress": "in_progress",
    "response.image_generation_call.generating": "generating",
    "response.image_generation_call.completed": "completed",
    "response.mcp_call.in_progress": "in_progress",
    "response.mcp_call.completed": "completed",
    "response.mcp_call.failed": "failed",
    "response.mcp_list_tools.in_progress": "in_progress",
    "response.mcp_list_tools.completed": "completed",
    "response.mcp_list_tools.failed": "failed",
    "response.compaction.compacting": "compacting",
}

# Streamed item fields: delta event -> (item field), done event -> (item field, event field).
BUFFER_DELTAS = {
    "response.function_call_arguments.delta": "arguments",
    "response.mcp_call_arguments.delta": "arguments",
    "response.custom_tool_call_input.delta": "input",
    "response.code_interpreter_call_code.delta": "code",
}
BUFFER_DONES = {
    "response.function_call_arguments.done": ("arguments", "arguments"),
    "response.mcp_call_arguments.done": ("arguments", "arguments"),
    "response.custom_tool_call_input.done": ("input", "input"),
    "response.code_interpreter_call_code.done": ("code", "code"),
}



MAX_ANSWER_CHARS = 2_000_000  # streamed characters per answer, unless the caller says otherwise
ITEMS_REASON, CHARS_REASON = "max_output_items", "max_answer_chars"


class OverLimit(Exception):
    """An item or part past the response's bound: the event that would add it is dropped."""


def _parts_in(data: dict[str, Any]) -> int:
    return sum(len(value) for key in ("content", "summary") if isinstance(value := data.get(key), list))


@dataclass
class AssemblerStats:
    events: int = 0  # events applied
    duplicates: int = 0  # ignored: sequence number already applied
    held: int = 0  # arrived ahead of a gap and were held
    gaps: int = 0  # holes given up on
    unknown: int = 0  # events of a type this code does not know
    restarts: int = 0  # times the provider's numbering went back to its start with new events
    unnumbered: bool = False  # every event carries one number: applied in arrival order
    anomalies: list[str] = field(default_factory=list)  # impossible orderings, repaired
    unknown_types: dict[str, int] = field(default_factory=dict)


class ItemEvents:
    def __init__(self, view: ViewModel, block_prefix: str, max_items: int) -> None:
        self.view = view
        self.block_prefix = block_prefix
        self.max_items = max_items
        self.limited = False  # an item or part past `max_items`, or text past `room`, was dropped
        self.limit_reason = ""  # which bound: ITEMS_REASON or CHARS_REASON
        self.room = MAX_ANSWER_CHARS  # streamed characters still accepted (the owner sets the bound)
        self.stats = AssemblerStats()
        self._items: dict[int, Item] = {}
        self._by_id: dict[str, Item] = {}
        self._parts = 0  # content and summary parts of every item
        # Items whose parts took text deltas since the last `share_text` (by output index).
        self._unshared: dict[int, Item] = {}
        self._anomaly_count = 0  # unbounded, unlike stats.anomalies: tells a repair happened

    def share_text(self) -> None:
        """Join each content part's text once, for the part and its view block alike.

        Both receive the same delta objects, but each would join its own list into its own
        string: two copies of every answer held for the life of the stream. Where they hold the
        same text, they now hold one string. Only the items whose text grew since the last
        call: a checkpoint at every item's end stays linear in the response."""
        view = self.view
        unshared, self._unshared = self._unshared, {}
        self._forget_text_target()  # the next delta marks its item again
        for item in unshared.values():
            for summary, parts in ((False, item.parts), (True, item.summary)):
                for index, part in parts.items():
                    block_id = part_block_id(item, index, summary)
                    if not view.has(block_id):
                        continue
                    block = view.pieces(block_id)
                    mine = part.text.pieces
                    if block is mine:
                        continue
                    if block == mine:  # the same pieces: fold once, for both
                        part.text.fold()
                    elif view.text(block_id) != part.text.value:
                        continue  # different text (a view the assembler does not own): leave it
                    block[:] = mine

    def _forget_text_target(self) -> None:
        """The assembler's cached text target (assembler.py)."""

    def _anomaly(self, message: str) -> None:
        self._anomaly_count += 1
        if len(self.stats.anomalies) < 100:  # bounded: a broken stream must not grow memory
            self.stats.anomalies.append(message)

    def _budget(self, items: int, parts: int) -> None:
        """Count `items` more items and `parts` more parts, or raise OverLimit past the bound."""
        if len(self._items) + items > self.max_items or self._parts + parts > self.max_items:
            if not self.limited:
                self.limited, self.limit_reason = True, ITEMS_REASON
                self._anomaly(f"more than {self.max_items} output items or parts; the rest is dropped")
            raise OverLimit
        self._parts += parts

    def _over_chars(self, delta: str, room: int) -> str:
        """A delta that passed the bound of streamed characters by `-room`: the part that fits."""
        if not self.limited:
            self.limited, self.limit_reason = True, CHARS_REASON
            self._anomaly("more streamed text than the answer's bound; the rest is dropped")
        return delta[:max(len(delta) + room, 0)]

    def _bounded_output(self, output: list[Any]) -> list[Any]:
        """A final Response's output (a terminal event, a reconcile) within the answer's bound:
        what its part texts add to the streamed ones is spent from `room`, and a text past it is
        cut to what fits."""
        room = self.room
        for data in output:
            if not isinstance(data, dict):
                continue
            item_id = data.get("id")
            streamed = self._by_id.get(item_id) if isinstance(item_id, str) else None
            for key, summary in (("content", False), ("summary", True)):
                parts = data.get(key)
                if not isinstance(parts, list):
                    continue
                for index, part in enumerate(parts):
                    field = PART_TEXT_FIELD.get(part.get("type", ""), "text") if isinstance(part, dict) else ""
                    text = part.get(field) if field else None
                    if not isinstance(text, str):
                        continue
                    known = (streamed.summary if summary else streamed.parts).get(index) if streamed else None
                    extra = len(text) - (len(known.text.value) if known is not None else 0)
                    if extra > room:
                        parts[index] = dict(part, **{field: self._over_chars(text, room - extra)})
                        extra = room
                    room -= max(extra, 0)
        self.room = room
        return output

    def _spend(self, delta: Any) -> Any:
        """A delta off the text path (summaries, arguments, commands, diffs, transcripts),
        counted against `room`: what fits of it."""
        if type(delta) is not str:
            return delta
        room = self.room - len(delta)
        if room < 0:
            delta, room = self._over_chars(delta, room), 0
        self.room = room
        return delta

    # --- items and parts ------------------------------------------------------------------

    def _new_item(self, data: dict[str, Any], index: int) -> Item:
        old = self._items.get(index)
        self._budget(old is None, _parts_in(data) - (len(old.parts) + len(old.summary) if old else 0))
        item = Item(data, index, self.block_prefix)
        self._items[index] = item
        if item.id:
            self._by_id[item.id] = item
        add_item_block(self.view, item)
        return item

    def _set_item(self, item: Item, data: dict[str, Any]) -> None:
        old_id = item.id
        self._budget(0, _parts_in(data) - len(item.parts) - len(item.summary))
        item.reset(data)
        if old_id and old_id != item.id:
            self._by_id.pop(old_id, None)
        if item.id:
            self._by_id[item.id] = item

    def _item(self, event: dict[str, Any]) -> Item:
        """The item an event addresses: by output index, else by item id, else repaired."""
        index = event.get("output_index")
        item = self._items.get(index) if type(index) is int else None
        item_id = event.get("item_id")
        if item is not None and (item_id is None or item.id is None or item.id == item_id):
            return item
        if item_id is not None:
            found = self._by_id.get(item_id)
            if found is not None:
                return found
        self._anomaly(f"{event['type']} for an item that was never added ({item_id or index})")
        if type(index) is not int or index in self._items:
            index = max(self._items, default=-1) + 1
        return self._new_item({"id": item_id, "type": implied_item_type(event["type"])}, index)

    def _part(self, event: dict[str, Any], *, summary: bool = False) -> tuple[Item, int, Part]:
        item = self._item(event)
        index = event.get("summary_index" if summary else "content_index", 0)
        part = item.part(index, summary=summary)
        if part is None:
            self._anomaly(f"{event['type']} before its part was added")
            part = self._add_part(item, index, {"type": implied_part_type(event["type"])}, summary)
        return item, index, part

    def _add_part(self, item: Item, index: int, data: dict[str, Any], summary: bool) -> Part:
        self._budget(0, 1)
        part = item.add_part(index, data, summary=summary)
        add_part_block(self.view, item, index, part, summary=summary)
        return part

    def _on_item_added(self, event: dict[str, Any]) -> None:
        data = event.get("item")
        index = event.get("output_index")
        if not isinstance(data, dict) or type(index) is not int:
            self._anomaly("response.output_item.added without an item or output_index")
            return
        existing = self._items.get(index)
        if existing is not None and existing.id == data.get("id"):
            return  # a repeat of what we have (legacy streams have no sequence numbers to tell)
        self._new_item(data, index)

    def _on_item_done(self, event: dict[str, Any]) -> None:
        data = event.get("item")
        if not isinstance(data, dict):
            self._anomaly("response.output_item.done without an item")
            return
        index = event.get("output_index")
        item = self._items.get(index)  # type: ignore[arg-type]
        if item is None:
            item = self._by_id.get(data.get("id", ""))
        if item is None and type(index) is int:  # never added (a server that sends no .added)
            self._anomaly(f"response.output_item.done for an item that was never added ({index})")
            item = self._new_item(data, index)
        elif item is None:
            item = self._item(event)
        keep = item.materialize()
        merged = dict(data)
        for key in ("content", "summary"):  # an item.done that omits parts must not lose them
            if not merged.get(key) and keep.get(key):
                merged[key] = keep[key]
        self._set_item(item, merged)
        item.done = True
        sync_item(self.view, item)

    def _on_part_added(self, event: dict[str, Any], summary: bool = False) -> None:
        item = self._item(event)
        index = event.get("summary_index" if summary else "content_index", 0)
        data = event.get("part")
        if item.part(index, summary=summary) is not None:
            return
        self._add_part(item, index, data if isinstance(data, dict) else {}, summary)

    def _on_part_done(self, event: dict[str, Any], summary: bool = False) -> None:
        item, index, part = self._part(event, summary=summary)
        data = event.get("part")
        if isinstance(data, dict):
            final = Part(data)
            if final.text.value or not part.text.value:  # never trade shown text for an empty one
                part.text.replace(final.text.value)
            part.data.update(final.data)
        sync_part(self.view, item, index, part, summary, done=True)

    def _on_text_done(self, event: dict[str, Any], field: str = "text") -> None:
        item, index, part = self._part(event)
        value = event.get(field)
        if isinstance(value, str):
            part.text.replace(value)
        sync_part(self.view, item, index, part, False, done=True)

    def _on_refusal_done(self, event: dict[str, Any]) -> None:
        self._on_text_done(event, "refusal")

    def _on_annotation(self, event: dict[str, Any]) -> None:
        item, index, part = self._part(event)
        annotations = part.data.setdefault("annotations", [])
        position = event.get("annotation_index")
        annotation = event.get("annotation")
        if type(position) is int and position < len(annotations):
            annotations[position] = annotation
        else:
            annotations.append(annotation)
        self.view.set(part_block_id(item, index, False), {"annotations": list(annotations)})

    def _on_summary_delta(self, event: dict[str, Any]) -> None:
        item, index, part = self._part(event, summary=True)
        self._unshared[item.index] = item
        delta = self._spend(event.get("delta", ""))
        part.text.append(delta)
        self.view.append(part_block_id(item, index, True), delta)

    def _on_summary_text_done(self, event: dict[str, Any]) -> None:
        item, index, part = self._part(event, summary=True)
        value = event.get("text")
        if isinstance(value, str):
            part.text.replace(value)
        sync_part(self.view, item, index, part, True, done=True)

    def _on_buffer_delta(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        delta = self._spend(event.get("delta", ""))
        item.buffer(BUFFER_DELTAS[event["type"]]).append(delta)
        if event["type"] == "response.code_interpreter_call_code.delta":
            self.view.append(item_block_id(item), delta)

    def _on_buffer_done(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        field_name, event_field = BUFFER_DONES[event["type"]]
        value = event.get(event_field)
        if isinstance(value, str):
            item.buffer(field_name).replace(value)
        if isinstance(event.get("name"), str):
            item.data["name"] = event["name"]
        sync_item(self.view, item)

    def _on_state(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        state = STATE_EVENTS[event["type"]]
        item.data["status"] = state
        self.view.set(item_block_id(item), {"state": state})

    def _on_partial_image(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        item.data["partial_image_index"] = event.get("partial_image_index")
        item.data["partial_image_b64"] = event.get("partial_image_b64")
        self.view.set(
            item_block_id(item),
            {"state": "generating", "partial_index": event.get("partial_image_index"),
             "image_b64": event.get("partial_image_b64")},
        )

    def _on_shell_command(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        index = event.get("command_index", 0)
        kind = event["type"].rsplit(".", 1)[1]
        if kind == "delta":
            item.command(index).append(self._spend(event.get("delta", "")))
        else:
            item.command(index).replace(event.get("command") or "")
        if kind == "done":
            sync_item(self.view, item)

    def _on_shell_output(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        if event["type"].endswith(".done") and isinstance(event.get("output"), list):
            item.data["output"] = event["output"]
            sync_item(self.view, item)

    def _on_patch_diff(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        operation = dict(item.data.get("operation") or {})
        if event["type"].endswith(".delta"):
            item.buffer("_diff").append(self._spend(event.get("delta", "")))
            return
        diff = event.get("diff")
        item.buffers.pop("_diff", None)
        operation["diff"] = diff if isinstance(diff, str) else operation.get("diff", "")
        item.data["operation"] = operation
        sync_item(self.view, item)

    def _on_audio(self, event: dict[str, Any]) -> None:
        if event["type"] == "response.audio.transcript.delta":
            if not self.view.has("audio"):
                self.view.add({"id": "audio", "kind": "audio", "state": "in_progress"})
            self.view.append("audio", self._spend(event.get("delta", "")))
        elif event["type"] == "response.audio.transcript.done" and self.view.has("audio"):
            self.view.set("audio", {"state": "completed"})


def implied_item_type(event_type: str) -> str:
    if "reasoning" in event_type:
        return "reasoning"
    if event_type.startswith(("response.output_text", "response.refusal", "response.content_part")):
        return "message"
    if event_type.startswith("response.function_call"):
        return "function_call"
    return event_type.split(".")[1] if "." in event_type else "unknown"


def implied_part_type(event_type: str) -> str:
    if event_type.startswith("response.refusal"):
        return "refusal"
    if event_type.startswith("response.reasoning_text"):
        return "reasoning_text"
    if event_type.startswith("response.reasoning_summary"):
        return "summary_text"
    return "output_text"

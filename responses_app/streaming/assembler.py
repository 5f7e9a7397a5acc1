"""The assembler: a state machine from Responses API stream events to a Response snapshot.

State is keyed by output index, item id and content/summary index, never one global string.
It promises:

- events whose `sequence_number` was already applied are ignored (duplicates, resume overlap);
  an event ahead of a gap is held for a bounded window so a swapped pair applies in order; if the
  gap does not fill, it is recorded and the held events are applied (the view never freezes);
- streams without `response.created` (a resume starting at `response.queued`/`in_progress`) and
  legacy streams without sequence numbers assemble like any other;
- the Response in `response.completed`/`failed`/`incomplete` is authoritative and replaces the
  snapshot, unless it omits output, in which case the deltas already shown are kept;
- `*.done` events fix the final value of their part even if deltas were lost;
- unknown event types are counted and otherwise ignored; impossible orderings (a delta for an item
  that never arrived) are recorded as anomalies and repaired, never raised;
- cost is linear in the stream: deltas are appended to chunk lists, joined on demand.

Every change is mirrored into a `ViewModel` (see view.py) as ops the relay coalesces and sends.
Pure: no Django, no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .events import is_known
from .items import Item, Part
from .view import ViewModel

TERMINAL_STATUSES = frozenset({"completed", "failed", "incomplete", "error", "cancelled"})

# Tool-ish item events that only move a state: event type -> state shown to people.
_STATE_EVENTS = {
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
}

# Streamed item fields: delta event -> (item field), done event -> (item field, event field).
_BUFFER_DELTAS = {
    "response.function_call_arguments.delta": "arguments",
    "response.mcp_call_arguments.delta": "arguments",
    "response.custom_tool_call_input.delta": "input",
    "response.code_interpreter_call_code.delta": "code",
}
_BUFFER_DONES = {
    "response.function_call_arguments.done": ("arguments", "arguments"),
    "response.mcp_call_arguments.done": ("arguments", "arguments"),
    "response.custom_tool_call_input.done": ("input", "input"),
    "response.code_interpreter_call_code.done": ("code", "code"),
}

# Text deltas of a content part, taken by the fast path in `_apply` (see `_text_target`).
_TEXT_DELTAS = frozenset({
    "response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta",
})

_TERMINAL_EVENTS = {
    "response.completed": "completed",
    "response.failed": "failed",
    "response.incomplete": "incomplete",
}


@dataclass
class AssemblerStats:
    events: int = 0  # events applied
    duplicates: int = 0  # ignored: sequence number already applied
    held: int = 0  # arrived ahead of a gap and were held
    gaps: int = 0  # holes given up on
    unknown: int = 0  # events of a type this code does not know
    anomalies: list[str] = field(default_factory=list)  # impossible orderings, repaired
    unknown_types: dict[str, int] = field(default_factory=dict)


class Assembler:
    """Feed events in arrival order; read `response()`, `status` and `view`."""

    def __init__(self, *, hold_window: int = 8, starting_after: int | None = None,
                 view: ViewModel | None = None, block_prefix: str = "") -> None:
        """`view` and `block_prefix` let several responses (a tool round's continuation) share
        one view: each response's blocks get ids starting with its prefix."""
        self.hold_window = hold_window
        self.view = view if view is not None else ViewModel()
        self.block_prefix = block_prefix
        self.stats = AssemblerStats()
        self.response_id: str | None = None
        self.status: str | None = None  # the response's own status, terminal or not
        self.error: dict[str, Any] | None = None
        self._response: dict[str, Any] = {}
        self._items: dict[int, Item] = {}
        self._by_id: dict[str, Item] = {}
        self._next_seq: int | None = None if starting_after is None else starting_after + 1
        self._held: dict[int, dict[str, Any]] = {}
        self.last_sequence_number: int | None = starting_after
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = self._build_handlers()
        self._anomaly_count = 0  # unbounded, unlike stats.anomalies: tells a repair happened
        # Where the last text delta went, while no other event has changed the structure since:
        # (output_index, item_id, content_index, part text append, part data, view block chunk
        # append, block id). Any event that is not a text delta clears it.
        self._fast: _TextTarget | None = None

    # --- public ---------------------------------------------------------------------------

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def held_count(self) -> int:
        return len(self._held)

    def feed(self, event: dict[str, Any]) -> None:
        """Apply one event, honouring sequence numbers."""
        seq = event.get("sequence_number")
        if type(seq) is not int:  # legacy streams carry none: apply in arrival order
            self._apply(event)
            return
        expected = self._next_seq
        if seq == expected or expected is None:
            self._next_seq = seq + 1
            self.last_sequence_number = seq
            self._apply(event)
            if self._held:
                self._drain()
        else:
            self._out_of_order(event, seq, expected)

    def feed_many(self, events: Iterable[dict[str, Any]]) -> None:
        """`feed` each event in turn; the same result, with the common case inlined.

        The common case is a text delta that is next in sequence, nothing is held, and the part
        it addresses is the one the previous delta went to (`_fast`). Anything else is `feed`.
        """
        feed = self.feed
        held = self._held  # the same dict for the assembler's life
        text_deltas = _TEXT_DELTAS
        ops_append = self.view._ops.append  # take_ops cannot run while this loop does
        expected = self._next_seq  # a local while on the fast path, stored before leaving it
        fast = 0  # events applied here: stats.events and the sequence are updated once
        shown = 0  # view ops appended here: view.revision is bumped once
        try:
            for event in events:
                seq = event.get("sequence_number")
                target = self._fast
                if (
                    seq != expected
                    or target is None
                    or held
                    or type(seq) is not int
                    or event["type"] not in text_deltas
                    or target[0] != (index := event.get("output_index"))
                    or target[1] != event.get("item_id")
                    or target[2] != event.get("content_index", 0)
                    or type(index) is not int
                    or type(delta := event.get("delta", "")) is not str
                ):
                    if fast:
                        self._sync_fast(expected, fast)
                        fast = 0
                    feed(event)
                    expected = self._next_seq
                    continue
                expected = seq + 1
                fast += 1
                target[3](delta)
                logprobs = event.get("logprobs")
                if logprobs:
                    target[4].setdefault("logprobs", []).extend(logprobs)
                if delta:  # as ViewModel.append, inlined
                    target[5](delta)
                    ops_append(["append", target[6], delta])
                    shown += 1
        finally:
            if fast:
                self._sync_fast(expected, fast)
            self.view.revision += shown

    def _sync_fast(self, expected: int | None, applied: int) -> None:
        assert expected is not None  # the fast path only runs on sequenced events
        self._next_seq = expected
        self.last_sequence_number = expected - 1
        self.stats.events += applied

    def _out_of_order(self, event: dict[str, Any], seq: int, expected: int) -> None:
        if seq < expected:
            self.stats.duplicates += 1
        elif seq in self._held:
            self.stats.duplicates += 1
        else:
            self._held[seq] = event
            self.stats.held += 1
            if len(self._held) > self.hold_window:
                self._skip_gap()

    def release_held(self) -> None:
        """Give up on every open gap and apply what is held (end of stream, or an idle timer)."""
        while self._held:
            self._skip_gap()

    def block_id_for(self, item_id: str | None) -> str | None:
        """The view block of a (non-message) output item, by item id."""
        item = self._by_id.get(item_id or "")
        return _item_block_id(item) if item is not None else None

    def response(self) -> dict[str, Any]:
        """The Response snapshot as it stands, shaped like the API's Response object."""
        self.share_text()
        out = dict(self._response)
        out["output"] = [self._items[i].materialize() for i in sorted(self._items)]
        return out

    def share_text(self) -> None:
        """Join each content part's text once, for the part and its view block alike.

        Both receive the same delta objects, but each would join its own list into its own
        string: two copies of every answer held for the life of the stream. Where they hold the
        same text, they now hold one string."""
        chunks = self.view._chunks
        for item in self._items.values():
            for summary, parts in ((False, item.parts), (True, item.summary)):
                for index, part in parts.items():
                    block = chunks.get(_part_block_id(item, index, summary))
                    mine = part.text._parts
                    if block is None or block is mine:
                        continue
                    if block == mine:  # the same pieces: join once, for both
                        part.text.value  # noqa: B018 -- joins `mine` in place
                    elif self.view.text(_part_block_id(item, index, summary)) != part.text.value:
                        continue  # different text (a view the assembler does not own): leave it
                    block[:] = mine

    # --- sequencing -----------------------------------------------------------------------

    def _drain(self) -> None:
        held = self._held
        while self._next_seq in held:
            seq = self._next_seq
            event = held.pop(seq)
            self._next_seq = seq + 1
            self.last_sequence_number = seq
            self._apply(event)

    def _skip_gap(self) -> None:
        first = min(self._held)
        self.stats.gaps += 1
        self._next_seq = first
        self._drain()

    def _apply(self, event: dict[str, Any]) -> None:
        self.stats.events += 1
        event_type = event["type"]
        if event_type in _TEXT_DELTAS:
            # The hot path: most events of a stream are text deltas for the part the previous
            # delta went to. Same addressing, no structural event since: same target.
            target = self._fast
            index = event.get("output_index")
            if (
                target is None
                or target[0] != index
                or target[1] != event.get("item_id")
                or target[2] != event.get("content_index", 0)
                or type(index) is not int
            ):
                target = self._text_target(event)
            delta = event.get("delta", "")
            if type(delta) is not str:
                self._anomaly(f"{event_type} with a delta that is not a string")
                return
            target[3](delta)
            logprobs = event.get("logprobs")
            if logprobs:
                target[4].setdefault("logprobs", []).extend(logprobs)
            if delta:  # as ViewModel.append, inlined
                target[5](delta)
                view = self.view
                view._ops.append(["append", target[6], delta])
                view.revision += 1
            return
        self._fast = None
        handler = self._handlers.get(event_type)
        if handler is not None:
            handler(event)
        elif not is_known(event_type):
            self.stats.unknown += 1
            self.stats.unknown_types[event_type] = self.stats.unknown_types.get(event_type, 0) + 1
        # known types without a handler (audio.done and the like) change nothing

    def _anomaly(self, message: str) -> None:
        self._anomaly_count += 1
        if len(self.stats.anomalies) < 100:  # bounded: a broken stream must not grow memory
            self.stats.anomalies.append(message)

    # --- lifecycle --------------------------------------------------------------------------

    def _on_lifecycle(self, event: dict[str, Any]) -> None:
        response = event.get("response")
        if not isinstance(response, dict):
            self._anomaly(f"{event['type']} without a response object")
            return
        self._take_response(response)
        if not self.terminal:
            self.status = response.get("status") or self.status
        self.view.set_meta(
            {"response_id": self.response_id, "status": self.status, "model": response.get("model")}
        )

    def _on_terminal(self, event: dict[str, Any]) -> None:
        response = event.get("response")
        status = _TERMINAL_EVENTS[event["type"]]
        if isinstance(response, dict):
            if response.get("status") == "cancelled":
                status = "cancelled"
            self._take_response(response)
            output = response.get("output")
            if isinstance(output, list) and output:  # authoritative, unless it omits output
                self._replace_output(output)
        else:
            self._anomaly(f"{event['type']} without a response object")
            response = {}
        self.status = status
        error = response.get("error") or (self.error if status == "failed" else None)
        details = response.get("incomplete_details") or {}
        self.view.set_meta(
            {
                "response_id": self.response_id,
                "status": status,
                "error": error,
                "incomplete_reason": details.get("reason") if isinstance(details, dict) else None,
                "usage": response.get("usage"),
            }
        )

    def _on_error(self, event: dict[str, Any]) -> None:
        # The catalogue puts code/message/param at the top; the wire nests them under "error".
        nested = event.get("error")
        source = nested if isinstance(nested, dict) else event
        self.error = {k: source.get(k) for k in ("code", "message", "param")}
        if not self.terminal:
            self.status = "error"
        self.view.set_meta({"status": self.status, "error": self.error})

    def _take_response(self, response: dict[str, Any]) -> None:
        self._response = {k: v for k, v in response.items() if k != "output"}
        rid = response.get("id")
        if isinstance(rid, str) and rid:
            self.response_id = rid

    def _replace_output(self, output: list[Any]) -> None:
        for index, data in enumerate(output):
            if not isinstance(data, dict):
                continue
            item = self._items.get(index)
            if item is None:
                item = self._new_item(data, index)
            else:
                self._set_item(item, data)
            item.done = True
            self._sync_item_view(item)
        for index in [i for i in self._items if i >= len(output)]:
            self._anomaly(f"final response omits output item {index}; dropped from the snapshot")
            del self._items[index]

    # --- items and parts ------------------------------------------------------------------

    def _new_item(self, data: dict[str, Any], index: int) -> Item:
        item = Item(data, index, self.block_prefix)
        self._items[index] = item
        if item.id:
            self._by_id[item.id] = item
        self._add_item_block(item)
        return item

    def _set_item(self, item: Item, data: dict[str, Any]) -> None:
        old_id = item.id
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
        return self._new_item({"id": item_id, "type": _implied_item_type(event["type"])}, index)

    def _part(self, event: dict[str, Any], *, summary: bool = False) -> tuple[Item, int, Part]:
        item = self._item(event)
        index = event.get("summary_index" if summary else "content_index", 0)
        part = item.part(index, summary=summary)
        if part is None:
            self._anomaly(f"{event['type']} before its part was added")
            implied = {"type": _implied_part_type(event["type"])}
            part = item.add_part(index, implied, summary=summary)
            self._add_part_block(item, index, part, summary=summary)
        return item, index, part

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
        item = self._items.get(event.get("output_index"))  # type: ignore[arg-type]
        if item is None:
            item = self._by_id.get(data.get("id", "")) or self._item(event)
        keep = item.materialize()
        merged = dict(data)
        for key in ("content", "summary"):  # an item.done that omits parts must not lose them
            if not merged.get(key) and keep.get(key):
                merged[key] = keep[key]
        self._set_item(item, merged)
        item.done = True
        self._sync_item_view(item)

    def _on_part_added(self, event: dict[str, Any], summary: bool = False) -> None:
        item = self._item(event)
        index = event.get("summary_index" if summary else "content_index", 0)
        data = event.get("part")
        if item.part(index, summary=summary) is not None:
            return
        part = item.add_part(index, data if isinstance(data, dict) else {}, summary=summary)
        self._add_part_block(item, index, part, summary=summary)

    def _on_part_done(self, event: dict[str, Any], summary: bool = False) -> None:
        item, index, part = self._part(event, summary=summary)
        data = event.get("part")
        if isinstance(data, dict):
            final = Part(data)
            if final.text.value or not part.text.value:  # never trade shown text for an empty one
                part.text.replace(final.text.value)
            part.data.update(final.data)
        self._sync_part_view(item, index, part, summary, done=True)

    def _text_target(self, event: dict[str, Any]) -> _TextTarget:
        """Resolve (and repair) where a text delta goes; remember it unless that took a repair."""
        anomalies = self._anomaly_count
        item, index, part = self._part(event)
        block_id = _part_block_id(item, index, False)
        view = self.view
        if not view.has(block_id):  # e.g. an item added with its parts already in it
            self._add_part_block(item, index, part)
        output_index = event.get("output_index")
        target: _TextTarget = (
            output_index, event.get("item_id"), event.get("content_index", 0),
            part.text._parts.append, part.data, view._chunks[block_id].append, block_id,
        )
        # Only a clean lookup is repeatable: a repair must run again for the next event.
        clean = anomalies == self._anomaly_count and type(output_index) is int
        self._fast = target if clean else None
        return target

    def _on_text_done(self, event: dict[str, Any], field: str = "text") -> None:
        item, index, part = self._part(event)
        value = event.get(field)
        if isinstance(value, str):
            part.text.replace(value)
        self._sync_part_view(item, index, part, False, done=True)

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
        self.view.set(_part_block_id(item, index, False), {"annotations": list(annotations)})

    def _on_summary_delta(self, event: dict[str, Any]) -> None:
        item, index, part = self._part(event, summary=True)
        delta = event.get("delta", "")
        part.text.append(delta)
        self.view.append(_part_block_id(item, index, True), delta)

    def _on_summary_text_done(self, event: dict[str, Any]) -> None:
        item, index, part = self._part(event, summary=True)
        value = event.get("text")
        if isinstance(value, str):
            part.text.replace(value)
        self._sync_part_view(item, index, part, True, done=True)

    def _on_buffer_delta(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        item.buffer(_BUFFER_DELTAS[event["type"]]).append(event.get("delta", ""))
        if event["type"] == "response.code_interpreter_call_code.delta":
            self.view.append(_item_block_id(item), event.get("delta", ""))

    def _on_buffer_done(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        field_name, event_field = _BUFFER_DONES[event["type"]]
        value = event.get(event_field)
        if isinstance(value, str):
            item.buffer(field_name).replace(value)
        if isinstance(event.get("name"), str):
            item.data["name"] = event["name"]
        self._sync_item_view(item)

    def _on_state(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        state = _STATE_EVENTS[event["type"]]
        item.data["status"] = state
        self.view.set(_item_block_id(item), {"state": state})

    def _on_partial_image(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        item.data["partial_image_index"] = event.get("partial_image_index")
        item.data["partial_image_b64"] = event.get("partial_image_b64")
        self.view.set(
            _item_block_id(item),
            {"state": "generating", "partial_index": event.get("partial_image_index"),
             "image_b64": event.get("partial_image_b64")},
        )

    def _on_shell_command(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        index = event.get("command_index", 0)
        kind = event["type"].rsplit(".", 1)[1]
        if kind == "delta":
            item.command(index).append(event.get("delta", ""))
        else:
            item.command(index).replace(event.get("command") or "")
        if kind == "done":
            self._sync_item_view(item)

    def _on_shell_output(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        if event["type"].endswith(".done") and isinstance(event.get("output"), list):
            item.data["output"] = event["output"]
            self._sync_item_view(item)

    def _on_patch_diff(self, event: dict[str, Any]) -> None:
        item = self._item(event)
        operation = dict(item.data.get("operation") or {})
        if event["type"].endswith(".delta"):
            item.buffer("_diff").append(event.get("delta", ""))
            return
        diff = event.get("diff")
        item.buffers.pop("_diff", None)
        operation["diff"] = diff if isinstance(diff, str) else operation.get("diff", "")
        item.data["operation"] = operation
        self._sync_item_view(item)

    def _on_audio(self, event: dict[str, Any]) -> None:
        if event["type"] == "response.audio.transcript.delta":
            if not self.view.has("audio"):
                self.view.add({"id": "audio", "kind": "audio", "state": "in_progress"})
            self.view.append("audio", event.get("delta", ""))
        elif event["type"] == "response.audio.transcript.done" and self.view.has("audio"):
            self.view.set("audio", {"state": "completed"})

    # --- view ---------------------------------------------------------------------------

    def _add_item_block(self, item: Item) -> None:
        kind = _BLOCK_KINDS.get(item.type, "tool")
        if kind == "message":
            for index in sorted(item.parts):
                self._add_part_block(item, index, item.parts[index])
            return
        block: dict[str, Any] = {
            "id": _item_block_id(item), "kind": kind, "item_id": item.id, "tool": item.type,
            "state": item.data.get("status") or "in_progress",
        }
        block.update(_tool_fields(item.materialize()))
        self.view.add(block)
        if kind == "reasoning":
            for index in sorted(item.summary):
                self._add_part_block(item, index, item.summary[index], summary=True)

    def _add_part_block(self, item: Item, index: int, part: Part, *, summary: bool = False) -> None:
        block_id = _part_block_id(item, index, summary)
        if self.view.has(block_id):
            return
        kind = "reasoning" if summary or part.data.get("type") == "reasoning_text" else (
            "refusal" if part.field == "refusal" else "text")
        block: dict[str, Any] = {
            "id": block_id, "kind": kind, "item_id": item.id, "state": "streaming",
            "text": part.text.value,
        }
        if kind == "text":
            block["annotations"] = list(part.data.get("annotations") or [])
        self.view.add(block)

    def _sync_part_view(
        self, item: Item, index: int, part: Part, summary: bool, *, done: bool
    ) -> None:
        block_id = _part_block_id(item, index, summary)
        if not self.view.has(block_id):
            self._add_part_block(item, index, part, summary=summary)
        fields: dict[str, Any] = {"text": part.text.value}
        if done:
            fields["state"] = "done"
        if "annotations" in part.data:
            fields["annotations"] = list(part.data["annotations"] or [])
        self.view.set(block_id, fields)

    def _sync_item_view(self, item: Item) -> None:
        """Bring the item's blocks in line with its (final) state."""
        for index in sorted(item.parts):
            self._sync_part_view(item, index, item.parts[index], False, done=item.done)
        for index in sorted(item.summary):
            self._sync_part_view(item, index, item.summary[index], True, done=item.done)
        if _BLOCK_KINDS.get(item.type, "tool") == "message":
            return
        block_id = _item_block_id(item)
        if not self.view.has(block_id):
            self._add_item_block(item)
        data = item.materialize()
        fields = _tool_fields(data)
        if item.done:
            fields["state"] = data.get("status") or "completed"
        if item.type == "code_interpreter_call" and isinstance(data.get("code"), str):
            fields["text"] = data["code"]
        self.view.set(block_id, fields)

    def _build_handlers(self) -> dict[str, Callable[[dict[str, Any]], None]]:
        h: dict[str, Callable[[dict[str, Any]], None]] = {
            "response.created": self._on_lifecycle,
            "response.queued": self._on_lifecycle,
            "response.in_progress": self._on_lifecycle,
            "response.completed": self._on_terminal,
            "response.failed": self._on_terminal,
            "response.incomplete": self._on_terminal,
            "error": self._on_error,
            "response.output_item.added": self._on_item_added,
            "response.output_item.done": self._on_item_done,
            "response.content_part.added": self._on_part_added,
            "response.content_part.done": self._on_part_done,
            "response.reasoning_summary_part.added": lambda e: self._on_part_added(e, True),
            "response.reasoning_summary_part.done": lambda e: self._on_part_done(e, True),
            "response.output_text.done": self._on_text_done,
            "response.output_text.annotation.added": self._on_annotation,
            "response.refusal.done": self._on_refusal_done,
            "response.reasoning_text.done": self._on_text_done,
            "response.reasoning_summary_text.delta": self._on_summary_delta,
            "response.reasoning_summary_text.done": self._on_summary_text_done,
            "response.image_generation_call.partial_image": self._on_partial_image,
            "response.shell_call_command.added": self._on_shell_command,
            "response.shell_call_command.delta": self._on_shell_command,
            "response.shell_call_command.done": self._on_shell_command,
            "response.shell_call_output_content.delta": self._on_shell_output,
            "response.shell_call_output_content.done": self._on_shell_output,
            "response.apply_patch_call_operation_diff.delta": self._on_patch_diff,
            "response.apply_patch_call_operation_diff.done": self._on_patch_diff,
            "response.audio.transcript.delta": self._on_audio,
            "response.audio.transcript.done": self._on_audio,
        }
        for name in _STATE_EVENTS:
            h[name] = self._on_state
        for name in _BUFFER_DELTAS:
            h[name] = self._on_buffer_delta
        for name in _BUFFER_DONES:
            h[name] = self._on_buffer_done
        return h


_TextTarget = tuple[
    Any, Any, Any, Callable[[str], None], dict[str, Any], Callable[[str], None], str
]

_BLOCK_KINDS = {"message": "message", "reasoning": "reasoning", "image_generation_call": "image"}

# Fields of a tool item worth showing, copied into its block when present.
_TOOL_FIELDS = (
    "name", "call_id", "server_label", "arguments", "input", "queries", "output", "error",
    "approval_request_id", "result", "container_id",
)


def _tool_fields(data: dict[str, Any]) -> dict[str, Any]:
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


def _item_block_id(item: Item) -> str:
    return f"{item.prefix}o{item.index}"


def _part_block_id(item: Item, index: int, summary: bool) -> str:
    return f"{item.prefix}o{item.index}-{'s' if summary else 'c'}{index}"


def _implied_item_type(event_type: str) -> str:
    if "reasoning" in event_type:
        return "reasoning"
    if event_type.startswith(("response.output_text", "response.refusal", "response.content_part")):
        return "message"
    if event_type.startswith("response.function_call"):
        return "function_call"
    return event_type.split(".")[1] if "." in event_type else "unknown"


def _implied_part_type(event_type: str) -> str:
    if event_type.startswith("response.refusal"):
        return "refusal"
    if event_type.startswith("response.reasoning_text"):
        return "reasoning_text"
    if event_type.startswith("response.reasoning_summary"):
        return "summary_text"
    return "output_text"

"""The assembler: a state machine from Responses API stream events to a Response snapshot.

State is keyed by output index, item id and content/summary index, never one global string.
It promises:

- events whose `sequence_number` was already applied are ignored (duplicates, resume overlap);
  an event ahead of a gap is held for a bounded window so a swapped pair applies in order; if the
  gap does not fill, it is recorded and the held events are applied (the view never freezes);
- streams without `response.created` (a resume starting at `response.queued`/`in_progress`) and
  legacy streams without sequence numbers assemble like any other;
- providers' own numberings (docs/providers.md, Dialects): a stream whose events all carry one
  number is applied in arrival order (`stats.unnumbered`), and a numbering that goes back to where
  it started with new events is a restart (`stats.restarts`), not duplicates: a repeat is told
  from new events by being the very event seen at that number;
- the Response in `response.completed`/`failed`/`incomplete` is authoritative and replaces the
  snapshot, unless it omits output, in which case the deltas already shown are kept;
- `*.done` events fix the final value of their part even if deltas were lost;
- unknown event types are counted and otherwise ignored; impossible orderings (a delta for an item
  that never arrived) are recorded as anomalies and repaired, never raised;
- cost is linear in the stream: deltas are appended to chunk lists, joined on demand;
- `feed`/`feed_many` say what the events did (`Applied`: a boundary reached, the first answer
  text, the first tool event, the terminal state), so the relay acts on values and never looks
  at event types itself.

Every change is mirrored into a `ViewModel` (see view.py, projection.py) as ops the relay
coalesces and sends. Item- and part-level events are handled in item_events.py, the response's
own (lifecycle, terminal, error) in lifecycle.py.
Pure: no Django, no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .events import is_known
from .item_events import BUFFER_DELTAS, BUFFER_DONES, STATE_EVENTS, AssemblerStats, OverLimit
from .lifecycle import ResponseEvents
from .projection import add_part_block, item_block_id, part_block_id
from .view import ViewModel
from .vocabulary import (
    ANSWER_TEXT_DELTAS,
    BOUNDARY_EVENT_TYPES,
    PART_TEXT_DELTAS,
    TERMINAL_EVENTS,
    is_tool_event,
)

__all__ = ["MAX_ITEMS", "Applied", "Assembler", "AssemblerStats"]

MAX_ITEMS = 500  # output items per response (and parts), unless the caller says otherwise


@dataclass(slots=True)
class Applied:
    """What a batch of events did, for the relay to act on."""

    boundary: bool = False  # a content part, item or the response ended: send and commit now
    first_text: bool = False  # this response's first answer text (time to first token)
    first_tool: bool = False  # this response's first tool event
    terminal: bool = False  # the response is in a terminal state
    limited: bool = False  # the response passed its bound of output items (see item_events.py)

    def then(self, later: Applied) -> Applied:
        """This batch's effects followed by a later batch's."""
        return Applied(self.boundary or later.boundary, self.first_text or later.first_text,
                       self.first_tool or later.first_tool, later.terminal, self.limited or later.limited)


class Assembler(ResponseEvents):
    """Feed events in arrival order; read `response()`, `status` and `view`."""

    def __init__(self, *, hold_window: int = 8, starting_after: int | None = None,
                 view: ViewModel | None = None, block_prefix: str = "", max_items: int = MAX_ITEMS,
                 secrets: tuple[str, ...] = ()) -> None:
        """`view` and `block_prefix` let several responses (a tool round's continuation) share
        one view: each response's blocks get ids starting with its prefix. `max_items`: the
        response's bound of output items, and of content and summary parts. `secrets`: masked
        in the upstream's error messages (masking.py)."""
        super().__init__(view if view is not None else ViewModel(), block_prefix, max_items, secrets)
        self.hold_window = hold_window
        self._next_seq: int | None = None if starting_after is None else starting_after + 1
        self._held: dict[int, dict[str, Any]] = {}
        self.last_sequence_number: int | None = starting_after
        # The first event of the current numbering, with its number: an event numbered the same
        # later on is a repeat when it is this event, else a provider's own (re)numbering.
        self._first: tuple[int, dict[str, Any]] | None = None
        # Where the last text delta went, while no other event has changed the structure since:
        # (output_index, item_id, content_index, part text append, part data, view block chunk
        # append, block id). Any event that is not a text delta clears it.
        self._fast: _TextTarget | None = None
        # What the events since the last `Applied` did (see `_applied`).
        self._boundaries = 0
        self.text_seen = False
        self.tool_seen = False
        self._reported = (0, False, False, False)
        self._last_activity = ""

    # --- public ---------------------------------------------------------------------------

    @property
    def held_count(self) -> int:
        return len(self._held)

    @property
    def holds_terminal(self) -> bool:
        """A terminal event waits behind a sequence gap."""
        return any(event["type"] in TERMINAL_EVENTS for event in self._held.values())

    def feed(self, event: dict[str, Any]) -> Applied:
        """Apply one event, honouring sequence numbers."""
        self._run((event,), True)
        return self._applied()

    def feed_many(self, events: Iterable[dict[str, Any]]) -> Applied:
        """`feed` each event in turn."""
        self._run(events, True)
        return self._applied()

    def release_held(self) -> Applied:
        """Give up on every open gap and apply what is held (end of stream, or an idle timer)."""
        while self._held:
            self._skip_gap()
        return self._applied()

    def block_id_for(self, item_id: str | None) -> str | None:
        """The view block of a (non-message) output item, by item id."""
        item = self._by_id.get(item_id or "")
        return item_block_id(item) if item is not None else None

    def function_calls(self) -> list[dict[str, Any]]:
        """The response's function calls that carry a call id (complete once it is terminal)."""
        return [call for call in self.output_items("function_call")
                if isinstance(call.get("call_id"), str) and call["call_id"]]

    def output_items(self, item_type: str) -> list[dict[str, Any]]:
        """The response's output items of one type, in output order."""
        return [item.materialize() for _index, item in sorted(self._items.items()) if item.type == item_type]

    def output_blocks(self) -> list[tuple[str, list[str], list[str]]]:
        """Per output item, in `response()`'s order: its block id and its content and summary
        parts' block ids (for matching a snapshot's texts with the view's)."""
        return [(item_block_id(item), [part_block_id(item, i, False) for i in sorted(item.parts)],
                 [part_block_id(item, i, True) for i in sorted(item.summary)])
                for _index, item in sorted(self._items.items())]

    def _forget_text_target(self) -> None:
        self._fast = None

    # --- what happened ----------------------------------------------------------------------

    def _activity(self, kind: str) -> None:
        """What the response is doing now (`meta.activity`: text, reasoning or tool), so a page
        can tell "no text yet, but a tool runs and events flow" from "nothing happens"."""
        if kind != self._last_activity:
            self._last_activity = kind
            self.view.set_meta({"activity": kind})

    def _applied(self) -> Applied:
        """The effects since the last call, as a value."""
        boundaries, text, tool, limited = self._boundaries, self.text_seen, self.tool_seen, self.limited
        before = self._reported
        self._reported = (boundaries, text, tool, limited)
        return Applied(boundary=boundaries != before[0], first_text=text and not before[1],
                       first_tool=tool and not before[2], terminal=self.terminal, limited=limited and not before[3])

    # --- sequencing and applying -----------------------------------------------------------

    def _run(self, events: Iterable[dict[str, Any]], sequenced: bool) -> None:
        """Apply events in order: the one place an event is applied. `sequenced`: check each one's
        sequence number first (held, dropped as a duplicate, or next); a run of events drained
        from the held ones (False) is in order already. The sequence and the count stay in
        locals, stored once; a text delta for the part the previous one went to (`_fast`) is
        the hot path, inline."""
        held = self._held  # the same dict for the assembler's life
        expected = self._next_seq
        ops = self.view.ops  # the view's op list cannot change during a run
        text_deltas = PART_TEXT_DELTAS
        applied = 0
        room = self.room  # streamed characters still accepted
        try:
            for event in events:
                if sequenced:
                    seq = event.get("sequence_number")
                    if type(seq) is int:  # legacy streams carry none: applied in arrival order
                        if seq != expected:  # the first event, a gap, a repeat or a restart
                            self._sync(expected)
                            self.room = room  # a gap given up on applies held events (a nested run)
                            admitted = self._admit(event, seq, expected)
                            expected, room = self._next_seq, self.room
                            if not admitted:
                                continue
                        else:
                            expected = seq + 1
                applied += 1
                event_type = event["type"]
                if event_type in text_deltas:
                    # Most events of a stream are text deltas for the part the previous delta
                    # went to: same addressing, no structural event since, same target.
                    target = self._fast
                    index = event.get("output_index")
                    if (target is None or target[0] != index or target[1] != event.get("item_id")
                            or target[2] != event.get("content_index", 0) or type(index) is not int):
                        target = self._text_target(event)
                    delta = event.get("delta", "")
                    if target is None:
                        pass  # past the bound of items: dropped
                    elif type(delta) is not str:
                        self._anomaly(f"{event_type} with a delta that is not a string")
                    else:
                        room -= len(delta)
                        if room < 0:  # past the bound of streamed text: what fits, then nothing
                            delta, room = self._over_chars(delta, room), 0
                        target[3](delta)
                        logprobs = event.get("logprobs")
                        if logprobs:
                            target[4].setdefault("logprobs", []).extend(logprobs)
                        if delta:  # ViewModel.append, with the part's block bound
                            target[5](delta)
                            ops.append(["append", target[6], delta])
                else:
                    self.room = room  # other deltas spend it too (item_events.py)
                    self._structural(event, event_type)
                    room = self.room
                if held and sequenced and expected in held:
                    self._sync(expected)
                    self.room = room
                    self._drain()
                    expected, room = self._next_seq, self.room
        finally:
            self._sync(expected)
            self.stats.events += applied
            self.room = room

    def _sync(self, expected: int | None) -> None:
        """Store where a run's local sequence stands."""
        if expected is not None and expected != self._next_seq:
            self._next_seq = expected
            self.last_sequence_number = expected - 1

    def _admit(self, event: dict[str, Any], seq: int, expected: int | None) -> bool:
        """An event whose number is not the next one: True to apply it now (the stream's first
        event, a provider that does not number, a restart), False when it was held or dropped.
        Sets `_next_seq` to what comes after it."""
        if expected is None:  # the first numbered event: where this stream's numbering starts
            self._first = (seq, event)
            self._at(seq)
            return True
        if self.stats.unnumbered:
            return True  # the provider does not number: arrival order, nothing is a duplicate
        first = self._first
        if seq < expected and first is not None and seq == first[0] and event != first[1] \
                and seq not in self._held:
            # Back to where the numbering started, with an event that is no copy of the one seen
            # there: not a repeat (a repeat is the same event) but the provider's own numbering.
            if expected == seq + 1:
                # Nothing was ever numbered past the first event: every event carries one number.
                self.stats.unnumbered = True
                self._anomaly(f"every event numbered {seq}: the provider does not number; arrival order")
                return True
            self.stats.restarts += 1
            self._anomaly(f"sequence numbers restart at {seq} after {expected - 1}: a new numbering, not a repeat")
            while self._held:  # held under the old numbering: their gaps will not fill now
                self._skip_gap()
            self._first = (seq, event)
            self._at(seq)
            return True
        self._out_of_order(event, seq, expected)
        return False

    def _at(self, seq: int) -> None:
        self._next_seq = seq + 1
        self.last_sequence_number = seq

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

    def _drain(self) -> None:
        """Apply the held events that are next in sequence now."""
        held = self._held
        ready = []
        while self._next_seq in held:
            seq = self._next_seq
            ready.append(held.pop(seq))
            self._next_seq = seq + 1
            self.last_sequence_number = seq
        self._run(ready, False)

    def _skip_gap(self) -> None:
        first = min(self._held)
        self.stats.gaps += 1
        self._next_seq = first
        self._drain()

    def _structural(self, event: dict[str, Any], event_type: str) -> None:
        """Any event but a text delta: its handler, and what it says about the response."""
        self._fast = None
        handler = _HANDLERS.get(event_type)
        if handler is not None:
            try:
                handler(self, event)
            except OverLimit:
                return
        elif not is_known(event_type):
            self.stats.unknown += 1
            self.stats.unknown_types[event_type] = self.stats.unknown_types.get(event_type, 0) + 1
        # known types without a handler (audio.done and the like) change nothing
        if event_type in BOUNDARY_EVENT_TYPES:
            self._boundaries += 1
        item = event.get("item")
        if is_tool_event(event_type, item.get("type") if isinstance(item, dict) else None):
            self.tool_seen = True
            self._activity("tool")
        elif "reasoning" in event_type:
            self._activity("reasoning")

    def _text_target(self, event: dict[str, Any]) -> _TextTarget | None:
        """Resolve (and repair) where a text delta goes, None past the bound of items; remember it
        unless that took a repair."""
        try:
            return self._resolve_text_target(event)
        except OverLimit:
            return None

    def _resolve_text_target(self, event: dict[str, Any]) -> _TextTarget:
        if event["type"] in ANSWER_TEXT_DELTAS:
            self.text_seen = True  # every part's first delta passes here, never the fast path
            self._activity("text")
        else:
            self._activity("reasoning")
        anomalies = self._anomaly_count
        item, index, part = self._part(event)
        block_id = part_block_id(item, index, False)
        view = self.view
        if not view.has(block_id):  # e.g. an item added with its parts already in it
            add_part_block(view, item, index, part)
        output_index = event.get("output_index")
        self._unshared[item.index] = item
        target: _TextTarget = (
            output_index, event.get("item_id"), event.get("content_index", 0),
            part.text.pieces.append, part.data, view.pieces(block_id).append, block_id,
        )
        # Only a clean lookup is repeatable: a repair must run again for the next event.
        clean = anomalies == self._anomaly_count and type(output_index) is int
        self._fast = target if clean else None
        return target

_Handler = Callable[["Assembler", dict[str, Any]], None]


def _build_handlers() -> dict[str, _Handler]:
    h: dict[str, _Handler] = {
        "response.created": Assembler._on_lifecycle,
        "response.queued": Assembler._on_lifecycle,
        "response.in_progress": Assembler._on_lifecycle,
        "response.completed": Assembler._on_terminal,
        "response.failed": Assembler._on_terminal,
        "response.incomplete": Assembler._on_terminal,
        "error": Assembler._on_error,
        "response.output_item.added": Assembler._on_item_added,
        "response.output_item.done": Assembler._on_item_done,
        "response.content_part.added": Assembler._on_part_added,
        "response.content_part.done": Assembler._on_part_done,
        "response.reasoning_summary_part.added": lambda a, e: a._on_part_added(e, True),
        "response.reasoning_summary_part.done": lambda a, e: a._on_part_done(e, True),
        "response.output_text.done": Assembler._on_text_done,
        "response.output_text.annotation.added": Assembler._on_annotation,
        "response.refusal.done": Assembler._on_refusal_done,
        "response.reasoning_text.done": Assembler._on_text_done,
        "response.reasoning_summary_text.delta": Assembler._on_summary_delta,
        "response.reasoning_summary_text.done": Assembler._on_summary_text_done,
        "response.image_generation_call.partial_image": Assembler._on_partial_image,
        "response.shell_call_command.added": Assembler._on_shell_command,
        "response.shell_call_command.delta": Assembler._on_shell_command,
        "response.shell_call_command.done": Assembler._on_shell_command,
        "response.shell_call_output_content.delta": Assembler._on_shell_output,
        "response.shell_call_output_content.done": Assembler._on_shell_output,
        "response.apply_patch_call_operation_diff.delta": Assembler._on_patch_diff,
        "response.apply_patch_call_operation_diff.done": Assembler._on_patch_diff,
        "response.audio.transcript.delta": Assembler._on_audio,
        "response.audio.transcript.done": Assembler._on_audio,
    }
    for name in STATE_EVENTS:
        h[name] = Assembler._on_state
    for name in BUFFER_DELTAS:
        h[name] = Assembler._on_buffer_delta
    for name in BUFFER_DONES:
        h[name] = Assembler._on_buffer_done
    return h


# One table for every assembler: a bound method per type per stream was a good share of each
# stream's memory (bench/README.md, storage).
_HANDLERS = _build_handlers()


_TextTarget = tuple[
    Any, Any, Any, Callable[[str], None], dict[str, Any], Callable[[str], None], str
]

"""The safety gate: what of the upstream's view viewers may see, window by checked window.

It sits between the assembler's view (everything the upstream said) and the public view (what
PatchStream publishes and Checkpointer commits). The transcript hands it the assembler's view ops;
it writes the public view and returns, as values, the windows that are due for a check. The relay
runs the checks and hands each verdict back. Gated are a block's `text` (answer, refusal,
reasoning, code) and every other field a tool block shows: what the model wrote (`arguments`,
`input`, a search's `query` / `queries`, a shell's `commands`, a patch's `operation`) as
`tool_arguments`, and what came back (`output`, a code interpreter's `outputs`, `result`,
`error`) as `tool_output`. A structured field (a list or a dict) is judged as its text (its
strings, one a line) and shown whole: a value appears only once all of its text passed.

A *window* is a run of one field's text: it ends after a sentence (`.`, `!`, `?` or `…` and a
whitespace character, or a newline) or a paragraph (a blank line), at `max_chars`, when its block
is done, at the end of the stream (`close_all`), and at the latest `interval` after its first
character came (`tick(now)`: time is an argument). Without ticks, where windows end depends only
on the text, never on how it was split into deltas. Each window goes with up to `context_chars`
of the field's text before it (already judged), so a phrase split across windows is still caught;
each window is judged once.

Modes:
* `progressive`: ops pass at once; on a flagged window everything not yet passed is retracted
  (`set` ops) and a notice block is added;
* `buffered`: ops are released in arrival order, a field's text only up to where its windows
  passed (an op behind held text waits too), so the public view never holds unchecked text. A
  text block itself is added only once some of its text passed (or it ended empty): no tab shows
  an empty bubble, and a block whose text was all withheld never appears.
On a flag both stop: later text is dropped, later structure (tool states, meta) still passes.
The flagged field's text stops where the violation starts when the checker says (`start`), else
where the window's context starts: a phrase cut by a window's time or length limit is taken back
whole, its part in earlier, passed windows too (progressive retracts it; buffered retracts any of
it already released by a `set`, so neither the view nor a checkpoint keeps a part of it).

Pure: no Django, no I/O, no clock.
"""

from __future__ import annotations

import os
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

from .view import Op, ViewModel

PROGRESSIVE = "progressive"
BUFFERED = "buffered"
MODES = (PROGRESSIVE, BUFFERED)
UNITS = ("sentence", "paragraph", "chars")

# What a gated field is to a checker (safety.checkers.Kind).
_TOOL_FIELDS = {
    "arguments": "tool_arguments", "input": "tool_arguments", "query": "tool_arguments",
    "queries": "tool_arguments", "commands": "tool_arguments", "operation": "tool_arguments",
    "output": "tool_output", "outputs": "tool_output", "result": "tool_output", "error": "tool_output",
}
GATED_FIELDS = frozenset({"text", *_TOOL_FIELDS})
# Fields judged before these were: their verdicts are stored under the block's own id. The others'
# go under "<block id>:<field>", so that a takeover knows how far each of them passed.
_PRIMARY_FIELDS = frozenset({"text", "arguments", "input", "output"})
# Keys of a structured value that are not text anyone reads (an image's data, ids).
_OPAQUE_KEYS = frozenset({"type", "url", "file_id", "container_id", "id", "image_url"})
# A block's state that ends its fields: a content part's `done`, a tool item's final status.
DONE_STATES = frozenset({"done", "completed", "failed", "incomplete", "cancelled"})
NOTICE_ID = "safety-notice"
_PRUNE_AT = 32  # windows
_TEXT_KINDS = frozenset({"text", "refusal", "reasoning", "audio"})  # a tool block's `text` is code


def field_text(value: Any) -> str:
    """The text of a shown field's value: a string as it is; a list's or a dict's strings, one a
    line, in order (so that a streamed list that grows at its end gives text that grows at its end)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text for text in (field_text(v) for v in value) if text)
    if isinstance(value, dict):
        return "\n".join(text for key, v in value.items() if key not in _OPAQUE_KEYS
                         for text in (field_text(v),) if text)
    return ""


def _gated(kind: str, name: str, value: Any) -> bool:
    """Is this field of a block of this kind judged? An image's `result` is the image itself."""
    if name not in GATED_FIELDS or not isinstance(value, (str, list, dict)):
        return False
    if not isinstance(value, str) and name == "text":
        return False
    return not (name == "result" and kind == "image")

# Where a window ends. Each match ends at a character that must already be there, and no later
# text can make an earlier match: the same text always gives the same cuts, whatever the deltas.
_BOUNDARIES = {
    "sentence": re.compile(r"[.!?…]\s|\n"),
    "paragraph": re.compile(r"\n[ \t]*\n"),
}


def window_end(text: str, unit: str, max_chars: int) -> int | None:
    """Where the first window of `text` ends, or None while it is still open."""
    pattern = _BOUNDARIES.get(unit)
    if pattern is not None:
        match = pattern.search(text, 0, max_chars)
        if match is not None:
            return match.end()
    return max_chars if len(text) >= max_chars else None


@dataclass(frozen=True, slots=True)
class Window:
    """One run of text to judge."""

    id: int
    block_id: str  # the block's id, or "<block id>:<field>" for a field judged apart (see _PRIMARY_FIELDS)
    field: str
    kind: str  # output | tool_arguments | tool_output
    start: int  # offsets in the field's text
    end: int
    text: str
    context: str  # up to context_chars of the field's text before `start`


class _Field:
    """One gated field of one block: its text so far, its windows and how far they passed."""

    __slots__ = ("block_id", "field", "kind", "chunks", "length", "start", "open", "opened_at",
                 "context", "windows", "passed", "next", "passed_to", "shown", "shown_text",
                 "release", "prepassed", "pruned_to", "view_id", "values")

    def __init__(self, block_id: str, field: str, kind: str, prepassed: int) -> None:
        self.view_id = block_id.split(":", 1)[0]  # the block in the view
        self.block_id = block_id
        self.field = field
        self.kind = kind
        self.chunks: list[str] = []
        self.length = 0
        self.start = 0  # where the open window starts
        self.open = ""  # the text from `start`: never longer than a window and a delta
        self.opened_at: float | None = None
        self.context = ""
        self.windows: list[Window] = []  # in order
        self.passed: set[int] = set()
        self.next = 0  # index of the first window not (yet) passed
        self.passed_to = 0  # the text up to here passed
        self.shown = 0  # the public view holds the text up to here
        self.shown_text = ""  # ... for fields other than `text` (short: tool arguments, outputs)
        self.release = 0  # index of the first window not wholly shown
        self.prepassed = prepassed  # judged by a runner before this one (a takeover)
        self.pruned_to = 0  # windows up to here were dropped: passed and shown, never needed again
        self.values: list[tuple[int, Any]] | None = None  # a structured field: (its text's length, value)

    def value_at(self, upto: int) -> Any:
        """A structured field's latest value whose whole text lies before `upto` (else empty)."""
        assert self.values is not None
        best: Any = None
        for length, value in self.values:
            if length <= upto:
                best = value
        if best is None and self.values:
            best = type(self.values[-1][1])()
        return best

    def prune(self, shown_all: bool) -> None:
        """Drop the windows that passed and were shown (`shown_all`: progressive shows at once),
        so a long answer is not held twice."""
        done = self.next if shown_all else min(self.next, self.release)
        if done >= _PRUNE_AT:
            self.pruned_to = self.windows[done - 1].end
            del self.windows[:done]
            self.next -= done
            self.release -= done

    def advance(self) -> None:
        while self.next < len(self.windows) and self.windows[self.next].id in self.passed:
            self.passed.discard(self.windows[self.next].id)
            self.passed_to = self.windows[self.next].end
            self.next += 1

    def slice(self, start: int, end: int) -> str:
        """The field's text from `start` to `end` (both within its windows), from the windows."""
        pieces = []
        index = self.release
        while index < len(self.windows) and self.windows[index].start < end:
            window = self.windows[index]
            if window.end > start:
                pieces.append(window.text[max(start, window.start) - window.start:min(end, window.end) - window.start])
            if window.end <= end:
                self.release = index + 1
            index += 1
        return "".join(pieces)


class SafetyGate:
    def __init__(self, mode: str, *, unit: str = "sentence", max_chars: int = 400, context_chars: int = 200,
                 interval: float = 0.5, passed: dict[tuple[str, str], int] | None = None) -> None:
        """`passed`: (block id, kind) → how far a runner before this one saw its text pass."""
        if mode not in MODES:
            raise ValueError(f"safety mode must be one of {', '.join(MODES)}, got {mode!r}")
        if unit not in UNITS:
            raise ValueError(f"safety window must be one of {', '.join(UNITS)}, got {unit!r}")
        self.mode = mode
        self.unit = unit
        self.max_chars = max_chars
        self.context_chars = context_chars
        self.interval = interval
        self.view = ViewModel()  # the public view; the transcript may hand its own
        self.stopped: Window | None = None  # the flagged window, once one was
        self.stopped_at = 0  # ... and where its field's text was stopped (see _stop)
        self.checked = 0  # windows handed out for a check
        self._prepassed = dict(passed or {})
        self._fields: dict[tuple[str, str], _Field] = {}
        self._kinds: dict[str, str] = {}  # block id → its kind
        self._windows: dict[int, _Field] = {}  # window id → its field, while its verdict is awaited
        self._due: list[Window] = []
        self._open_since: dict[tuple[str, str], float] = {}
        # buffered: ("op", op, None) | ("grow", field, upto) | ("hold", add op, block id): a text block's add
        self._queue: deque[tuple[str, Any, Any]] = deque()
        self._ended: set[str] = set()  # blocks whose fields are done
        self._dropped: set[str] = set()  # held blocks never added (all their text withheld): their ops go nowhere
        self._next_id = 0
        self._now = 0.0

    # --- input -------------------------------------------------------------------------------

    def push(self, ops: list[Op], now: float | None = None) -> None:
        """The upstream view's ops, in order."""
        if now is not None:
            self._now = now
        index, count = 0, len(ops)
        while index < count:
            op = ops[index]
            index += 1
            kind = op[0]
            if kind == "append":
                # A run of appends to one block is one growth: one look for a window's end.
                block_id, texts = op[1], [op[2]]
                while index < count and ops[index][0] == "append" and ops[index][1] == block_id:
                    texts.append(ops[index][2])
                    index += 1
                text = "".join(texts) if len(texts) > 1 else op[2]
                self._grow(block_id, "text", text, ["append", block_id, text])
            elif kind == "add":
                self._add(op[1])
            elif kind == "set":
                self._set(op[1], op[2])
            else:
                self._pass(op)
        if self._queue:
            self._release()

    def tick(self, now: float) -> None:
        """Close every window that has been open for `interval`."""
        self._now = now
        for key, since in list(self._open_since.items()):
            if now - since >= self.interval:
                self._close(self._fields[key])

    def next_deadline(self) -> float | None:
        return min(self._open_since.values()) + self.interval if self._open_since else None

    def close_all(self) -> None:
        """The stream ended: every open window closes."""
        for field in list(self._fields.values()):
            self._close(field)

    def take_windows(self) -> list[Window]:
        """The windows due for a check since the last call, each handed out once."""
        windows, self._due = self._due, []
        self.checked += len(windows)
        return windows

    @property
    def pending(self) -> int:
        """Windows handed out whose verdict has not come."""
        return len(self._windows)

    @property
    def judged(self) -> bool:
        """No window is open, due or awaiting its verdict: the public view will not change
        unless more text comes (a flag could still take text back while one is)."""
        return not self._windows and not self._due and not self._open_since

    def verdict(self, window_id: int, flagged: bool, start: int | None = None) -> str:
        """A check's result; what was done with the window (passed, withheld, retracted).
        `start`: where a flagged violation starts, an offset into the window's context + text
        (None: unknown)."""
        field = self._windows.pop(window_id, None)
        hidden = "withheld" if self.mode == BUFFERED else "retracted"
        if field is None or self.stopped is not None:
            return hidden  # the request stopped (or the text was rewritten): it is not shown
        if flagged:
            self._stop(field, next(w for w in field.windows if w.id == window_id), start)
            return hidden
        field.passed.add(window_id)
        field.advance()
        if self._queue:
            self._release()
        field.prune(self.mode == PROGRESSIVE)
        return "passed"

    def finish(self) -> None:
        """The request ends: what passed is released, anything unchecked stays unseen."""
        self._drain()
        self._windows.clear()
        self._open_since.clear()

    # --- ops ---------------------------------------------------------------------------------

    def _pass(self, op: Op) -> None:
        if self._queue:
            self._queue.append(("op", op, None))
        else:
            self._apply(op)

    def _apply(self, op: Op) -> None:
        kind, view = op[0], self.view
        if kind != "meta" and self._dropped and (op[1]["id"] if kind == "add" else op[1]) in self._dropped:
            return
        if kind == "add":
            view.add(op[1])
        elif kind == "set":
            view.set(op[1], op[2])
        elif kind == "meta":
            view.set_meta(op[1])
        else:
            view.append(op[1], op[2])

    def _add(self, block: dict[str, Any]) -> None:
        block_id = block["id"]
        if self.stopped is not None and str(block.get("kind") or "") in _TEXT_KINDS:
            self._dropped.add(block_id)  # no more text is shown: not even an empty bubble for it
            return
        if self.mode == PROGRESSIVE and self.stopped is None:
            self._apply(["add", block])
        else:
            kind = str(block.get("kind") or "")
            plain = {k: v for k, v in block.items() if not _gated(kind, k, v)}
            plain["text"] = ""
            if self.mode == BUFFERED and kind in _TEXT_KINDS and self.stopped is None:
                self._queue.append(("hold", ["add", plain], block_id))
            else:
                self._pass(["add", plain])
        self._kinds[block_id] = str(block.get("kind") or "")
        for name in GATED_FIELDS:
            value = block.get(name)
            if isinstance(value, str) and _gated(self._kinds[block_id], name, value):
                self._grow(block_id, name, value, None)
            elif _gated(self._kinds[block_id], name, value):
                self._structured(block_id, name, value)
        if block.get("state") in DONE_STATES:
            self._close_block(block_id)

    def _set(self, block_id: str, fields: dict[str, Any]) -> None:
        block_kind = self._kinds.get(block_id, "")
        gated = {k: v for k, v in fields.items() if _gated(block_kind, k, v)}
        plain = {k: v for k, v in fields.items() if k not in gated}
        if gated and self.mode == PROGRESSIVE and self.stopped is None:
            self._apply(["set", block_id, fields])
            plain = {}
        for name, value in gated.items() if self.stopped is None else ():
            if not isinstance(value, str):
                self._structured(block_id, name, value)
                continue
            field = self._field(block_id, name)
            text = "".join(field.chunks) if len(field.chunks) != 1 else field.chunks[0]
            field.chunks[:] = [text] if text else []
            if value.startswith(text):
                self._grow(block_id, name, value[len(text):], None)
            else:
                self._rewrite(field, text, value)
        if plain:
            self._pass(["set", block_id, plain])
        if fields.get("state") in DONE_STATES:
            self._close_block(block_id)

    def _field(self, block_id: str, name: str) -> _Field:
        key = (block_id, name)
        field = self._fields.get(key)
        if field is None:
            tool = self._kinds.get(block_id) not in _TEXT_KINDS
            kind = _TOOL_FIELDS.get(name, "tool_arguments" if tool else "output")
            judged_as = block_id if name in _PRIMARY_FIELDS else f"{block_id}:{name}"
            field = self._fields[key] = _Field(judged_as, name, kind, self._prepassed.get((judged_as, kind), 0))
        return field

    def _structured(self, block_id: str, name: str, value: Any) -> None:
        """A list or dict field's new value: judged as its text, shown whole once that passed."""
        if self.stopped is not None:
            return
        field = self._field(block_id, name)
        if field.values is None:
            field.values = []
        text = field_text(value)
        old = "".join(field.chunks)
        field.chunks[:] = [old] if old else []
        if text == old:  # the same words (an exit code, a status changed): the value stands for them
            field.values = [(n, v) for n, v in field.values if n < len(text)] + [(len(text), value)]
            if self.mode == BUFFERED and field.shown >= len(text):
                self._pass(["set", block_id, {name: value}])
        elif text.startswith(old):
            field.values.append((len(text), value))
            self._grow(block_id, name, text[len(old):], None)
        else:
            common = len(os.path.commonprefix([old, text]))
            field.values = [(n, v) for n, v in field.values if n <= common] + [(len(text), value)]
            self._rewrite(field, old, text)

    def _grow(self, block_id: str, name: str, text: str, op: Op | None) -> None:
        """Text added to a field (`op`: the append that added it, passed on in progressive mode)."""
        if self.stopped is not None:
            return  # nothing more is shown
        field = self._fields.get((block_id, name)) or self._field(block_id, name)
        if op is not None and self.mode == PROGRESSIVE:
            self._apply(op)
        if not text:
            return
        field.chunks.append(text)
        field.length += len(text)
        if self.mode == PROGRESSIVE:
            self._shown(field, field.length, text)
        else:
            last = self._queue[-1] if self._queue else None
            if last is not None and last[0] == "grow" and last[1] is field:
                self._queue[-1] = ("grow", field, field.length)
            else:
                self._queue.append(("grow", field, field.length))
        field.open += text
        self._cut(field)

    def _shown(self, field: _Field, upto: int, text: str) -> None:
        field.shown = upto
        if field.field != "text":
            field.shown_text += text

    # --- windows -----------------------------------------------------------------------------

    def _cut(self, field: _Field, *, close: bool = False) -> None:
        cut = False
        while field.open:
            if field.start < field.prepassed:  # judged before a takeover: passed, not judged again
                need = field.prepassed - field.start
                if len(field.open) < need and not close:
                    break
                end: int | None = min(need, len(field.open))
            else:
                end = window_end(field.open, self.unit, self.max_chars)
                if end is None:
                    if not close:
                        break
                    end = len(field.open)
            assert end is not None
            text, field.open = field.open[:end], field.open[end:]
            window = Window(self._next_id, field.block_id, field.field, field.kind, field.start,
                            field.start + end, text, field.context)
            self._next_id += 1
            cut = True
            field.windows.append(window)
            field.start = window.end
            field.context = (field.context + text)[-self.context_chars:]
            if window.end <= field.prepassed:
                field.passed.add(window.id)
                field.advance()
            else:
                self._windows[window.id] = field
                self._due.append(window)
        key = (field.view_id, field.field)
        if not field.open:
            field.opened_at = None
            self._open_since.pop(key, None)
        elif cut or field.opened_at is None:  # the rest came with the latest text
            field.opened_at = self._now
            self._open_since[key] = self._now

    def _close(self, field: _Field) -> None:
        if field.open and self.stopped is None:
            self._cut(field, close=True)

    def _close_block(self, block_id: str) -> None:
        self._ended.add(block_id)
        for name in GATED_FIELDS:
            field = self._fields.get((block_id, name))
            if field is not None:
                self._close(field)

    def _rewrite(self, field: _Field, old: str, value: str) -> None:
        """A field's text replaced by one that does not extend it (a `.done` that disagrees with
        the deltas): windows past the common prefix are dropped and the rest is judged anew."""
        common = 0
        limit = min(len(old), len(value))
        while common < limit and old[common] == value[common]:
            common += 1
        kept = [w for w in field.windows if w.end <= min(common, field.passed_to)]
        for window in field.windows[len(kept):]:
            self._windows.pop(window.id, None)
        field.windows = kept
        field.next = field.release = len(kept)
        if kept:
            field.start = kept[-1].end
        else:  # before the dropped windows, if they all lie in the common part; else from the start
            field.start = field.pruned_to if field.pruned_to <= common else 0
            field.pruned_to = min(field.pruned_to, field.start)
        field.passed_to = field.start
        field.context = value[max(0, field.start - self.context_chars):field.start]
        field.chunks[:] = [value] if value else []
        field.length = len(value)
        field.open = ""
        field.opened_at = None
        if self.mode == PROGRESSIVE:
            field.shown, field.shown_text = field.length, value if field.field != "text" else ""
        else:
            for index, (kind, what, upto) in enumerate(self._queue):
                if kind == "grow" and what is field:
                    self._queue[index] = ("grow", field, min(upto, field.start))
            if field.shown > field.start:
                self._retract(field)
        rest = value[field.start:]
        if rest and self.stopped is None:
            if self.mode == BUFFERED:
                self._queue.append(("grow", field, field.length))
            field.opened_at = self._now
            self._open_since[(field.view_id, field.field)] = self._now
            field.open = rest
            self._cut(field)

    # --- release and retraction --------------------------------------------------------------

    def _release(self) -> None:
        """Buffered: apply queued ops in order, a field's text up to where it passed."""
        queue = self._queue
        while queue:
            kind, what, upto = queue[0]
            if kind == "op":
                self._apply(what)
                queue.popleft()
                continue
            if kind == "hold":
                if not self._showable(upto):
                    return
                self._apply(what)
                queue.popleft()
                continue
            field: _Field = what
            target = min(upto, field.passed_to)
            if target > field.shown:
                self._show(field, target)
            if field.shown < upto:
                return
            queue.popleft()

    def _showable(self, block_id: str) -> bool:
        """A held text block may be added: some of its text passed, or it ended with none."""
        field = self._fields.get((block_id, "text"))
        return field is None or field.passed_to > 0 or (block_id in self._ended and field.length == 0)

    def _show(self, field: _Field, target: int) -> None:
        text = field.slice(field.shown, target)
        if field.field == "text":
            self.view.append(field.view_id, text)
        elif field.values is not None:
            self.view.set(field.view_id, {field.field: field.value_at(target)})
        else:
            self.view.set(field.view_id, {field.field: field.shown_text + text})
        self._shown(field, target, text)

    def _drain(self) -> None:
        """Buffered: everything queued goes out now, text only as far as it passed."""
        queue, self._queue = self._queue, deque()
        for kind, what, upto in queue:
            if kind == "hold":
                if self._showable(upto):
                    self._apply(what)
                else:
                    self._dropped.add(upto)
            elif kind == "op":
                self._apply(what)
            elif min(upto, what.passed_to) > what.shown:
                self._show(what, min(upto, what.passed_to))

    def _retract(self, field: _Field) -> None:
        keep = field.passed_to
        if field.values is not None:
            field.shown_text = field.shown_text[:keep]
            self.view.set(field.view_id, {field.field: field.value_at(keep)})
            field.shown = keep
            field.release = min(field.release, field.next)
            return
        if field.field == "text":
            text = self.view.text(field.view_id)[:keep]
        else:
            text = field.shown_text = field.shown_text[:keep]
        self.view.set(field.view_id, {field.field: text})
        field.shown = keep
        field.release = min(field.release, field.next)

    def _stop(self, flagged: _Field, window: Window, start: int | None) -> None:
        """A flagged window: its field's text stops where the violation starts (if the checker
        said), else where the window's context starts (the flagged words may lie there), and at
        the latest where the window starts. Text before that point that was shown, in earlier
        windows that passed, is taken back too: no part of a phrase cut by a window's end stays."""
        context_start = window.start - len(window.context)
        stop = context_start if start is None else context_start + max(0, start)
        self.stopped = window
        self.stopped_at = min(stop, window.start)
        flagged.passed_to = min(flagged.passed_to, self.stopped_at)
        if self.mode == BUFFERED:
            self._drain()  # what passed before the stop point goes out; none of it after
        for field in self._fields.values():
            if field.shown > field.passed_to:
                self._retract(field)
        self._windows.clear()
        self._due.clear()
        self._open_since.clear()
        # Right after the block whose text was stopped; in buffered mode one never shown sits
        # after everything shown (the public view is a prefix of the upstream's).
        block_id = window.block_id.split(":", 1)[0]
        after = block_id if self.view.has(block_id) else self.view.last_block_id()
        notice = {"id": NOTICE_ID, "kind": "compaction", "tool": "content_filter",
                  "state": "withheld" if self.mode == BUFFERED else "retracted", "block_id": block_id}
        self.view.add({**notice, "after": after} if after is not None else notice)

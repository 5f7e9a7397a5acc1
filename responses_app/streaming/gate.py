"""The safety gate: what of the upstream's view viewers may see, window by checked window.

It sits between the assembler's view (everything the upstream said) and the public view (what
PatchStream publishes and the checkpoints commit). The transcript hands it the assembler's view
ops; it writes the public view and returns, as values, the windows that are due for a check
(windows.py). The relay runs the checks and hands each verdict back. Gated is every field the
view schema (schema.py) does not prove safe: a block's `text` (answer, refusal, reasoning,
code), a text's citations, everything a tool block shows (its name and server label, what the
model wrote as `tool_arguments`, what came back as `tool_output`), and the meta's error and
incomplete reason as the upstream words them. A structured field (a list or a dict) is shown
whole: a value appears only once all of its text passed.

Modes:
* `progressive`: ops pass at once; on a flagged window everything not yet passed is retracted
  (`set` ops) and a notice block is added;
* `buffered`: ops are released in arrival order, a field's text only up to where its windows
  passed (an op behind held text waits too), so the public view never holds unchecked text. A
  text block itself is added only once some of its text passed (or it ended empty): no tab shows
  an empty bubble, and a block whose text was all withheld never appears.
On a flag both stop: later text is dropped, later structure (tool states, plain meta) still passes.
The flagged field's text stops where the violation starts when the checker says (`start`). When
it cannot say, the window is taken back at once and judged once more without its context: flagged
alone, the text stops at the window's start (what passed before stays); passing alone, the
violation spans the window's start and the text stops where its context starts, so a phrase cut
by a window's time or length limit is taken back whole, its part in earlier, passed windows too
(progressive retracts it; buffered retracts any of it already released, so neither the view nor a
checkpoint keeps a part of it).

Pure: no Django, no I/O, no clock.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any

from .schema import META, safe_fields
from .view import Op, ViewModel
from .windows import CITATION_OPAQUE_KEYS, GatedField, Window, WindowKeeper, field_text, window_end

__all__ = ["BUFFERED", "DONE_STATES", "MODES", "NOTICE_ID", "PROGRESSIVE", "SafetyGate", "Window", "window_end"]

PROGRESSIVE = "progressive"
BUFFERED = "buffered"
MODES = (PROGRESSIVE, BUFFERED)

# A block's state that ends its fields: a content part's `done`, a tool item's final status.
DONE_STATES = frozenset({"done", "completed", "failed", "incomplete", "cancelled"})
NOTICE_ID = "safety-notice"
_TEXT_KINDS = frozenset({"text", "refusal", "reasoning", "audio"})  # a tool block's `text` is code


def _gated(kind: str, name: str, value: Any) -> bool:
    """Is this field of a block of this kind (or of the meta) judged? Every text-bearing value
    the schema does not prove safe is: a field it does not know too."""
    if not isinstance(value, (str, list, dict)) or (name == "text" and not isinstance(value, str)):
        return False
    return name not in safe_fields(kind)


class SafetyGate(WindowKeeper):
    def __init__(self, mode: str, *, unit: str = "sentence", max_chars: int = 400, context_chars: int = 200,
                 interval: float = 0.5, passed: dict[tuple[str, str], int] | None = None) -> None:
        """`passed`: (block id, kind) → how far a runner before this one saw its text pass."""
        if mode not in MODES:
            raise ValueError(f"safety mode must be one of {', '.join(MODES)}, got {mode!r}")
        super().__init__(unit=unit, max_chars=max_chars, context_chars=context_chars, interval=interval,
                         passed=passed)
        self.mode = mode
        self.view = ViewModel()  # the public view; the transcript may hand its own
        self.stopped_at = 0  # where the flagged field's text was stopped (see _stop)
        # buffered: ("op", op, None) | ("grow", field, upto) | ("hold", add op, block id): a text block's add
        self._queue: deque[tuple[str, Any, Any]] = deque()
        self._dropped: set[str] = set()  # held blocks never added (all their text withheld): their ops go nowhere
        self._alone: tuple[int, Window] | None = None  # (the id of a flagged window judged again alone, it)

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
                self._set(META, op[1])
        if self._queue:
            self._release()

    def verdict(self, window_id: int, flagged: bool, start: int | None = None) -> str:
        """A check's result; what was done with the window (passed, withheld, retracted).
        `start`: where a flagged violation starts, an offset into the window's context + text
        (None: unknown)."""
        field = self._windows.pop(window_id, None)
        hidden = "withheld" if self.mode == BUFFERED else "retracted"
        if self._alone is not None and self._alone[0] == window_id and field is not None:
            flagged_window = self._alone[1]
            self._alone = None
            if not flagged:  # it passes alone: the violation spans its start, in the context too
                self._stop_at(field, flagged_window.start - len(flagged_window.context))
            return hidden
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
        self._alone = None

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
        elif kind == "set" and op[1] == META:
            view.set_meta(op[2])
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
        kind = self._kinds[block_id] = str(block.get("kind") or "")
        for name, value in block.items():
            if _gated(kind, name, value):
                if isinstance(value, str):
                    self._grow(block_id, name, value, None)
                else:
                    self._structured(block_id, name, value)
        if block.get("state") in DONE_STATES:
            self._close_block(block_id)

    def _set(self, block_id: str, fields: dict[str, Any]) -> None:
        """A block's fields replaced, or the meta's (`block_id` META): its values are whole, so
        their windows close at once."""
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
            self._pass(["set", block_id, plain] if block_id != META else ["meta", plain])
        if block_id == META and gated:
            for name in gated:
                self._close(self._field(META, name))
        elif fields.get("state") in DONE_STATES:
            self._close_block(block_id)

    def _structured(self, block_id: str, name: str, value: Any) -> None:
        """A list or dict field's new value: judged as its text, shown whole once that passed."""
        if self.stopped is not None:
            return
        field = self._field(block_id, name)
        if field.values is None:
            field.values = []
        text = field_text(value, CITATION_OPAQUE_KEYS) if name == "annotations" else field_text(value)
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

    def _shown(self, field: GatedField, upto: int, text: str) -> None:
        field.shown = upto
        if field.field != "text":
            field.shown_text += text

    def _rewrite(self, field: GatedField, old: str, value: str) -> None:
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
        self._open_since.pop((field.view_id, field.field), None)  # a rewrite leaving nothing open
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
            field: GatedField = what
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

    def _show(self, field: GatedField, target: int) -> None:
        text = field.slice(field.shown, target)
        if field.field == "text":
            self.view.append(field.view_id, text)
        else:
            self._set_public(field, field.value_at(target) if field.values is not None else field.shown_text + text)
        self._shown(field, target, text)

    def _set_public(self, field: GatedField, value: Any) -> None:
        if field.view_id == META:
            self.view.set_meta({field.field: value})
        else:
            self.view.set(field.view_id, {field.field: value})

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

    def _retract(self, field: GatedField) -> None:
        keep = field.passed_to
        if field.values is not None:
            field.shown_text = field.shown_text[:keep]
            self._set_public(field, field.value_at(keep))
        elif field.field == "text":
            self.view.set(field.view_id, {"text": self.view.text(field.view_id)[:keep]})
        else:
            field.shown_text = field.shown_text[:keep]
            self._set_public(field, field.shown_text)
        field.shown = keep
        field.release = min(field.release, field.next)

    def _stop(self, flagged: GatedField, window: Window, start: int | None) -> None:
        """A flagged window: its field's text stops where the violation starts (if the checker
        said), and at the latest where the window starts. Text before that point that was shown,
        in earlier windows that passed, is taken back too: no part of a phrase cut by a window's
        end stays. A checker that cannot say where judges the window once more, alone: passing
        alone, the violation spans its start and the text stops where its context starts."""
        context_start = window.start - len(window.context)
        stop = window.start if start is None else context_start + max(0, start)
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
        if start is None and window.context:
            again = Window(self._next_id, window.block_id, window.field, window.kind, window.start, window.end,
                           window.text, window.context, alone=True)
            self._next_id += 1
            self._windows[again.id] = flagged
            self._due.append(again)
            self._alone = (again.id, window)
        # Right after the block whose text was stopped; in buffered mode one never shown sits
        # after everything shown (the public view is a prefix of the upstream's).
        block_id = window.block_id.split(":", 1)[0]
        after = block_id if self.view.has(block_id) else self.view.last_block_id()
        notice = {"id": NOTICE_ID, "kind": "compaction", "tool": "content_filter",
                  "state": "withheld" if self.mode == BUFFERED else "retracted", "block_id": block_id}
        self.view.add({**notice, "after": after} if after is not None else notice)

    def _stop_at(self, field: GatedField, position: int) -> None:
        """The stopped field's text stops earlier: the violation spans its window's start."""
        self.stopped_at = min(self.stopped_at, position)
        field.passed_to = min(field.passed_to, self.stopped_at)
        if field.shown > field.passed_to:
            self._retract(field)

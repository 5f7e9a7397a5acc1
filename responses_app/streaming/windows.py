"""Windows: the runs of a gated field's text that the safety gate (gate.py) hands out for a check.

A *window* is a run of one field's text: it ends after a sentence (`.`, `!`, `?` or `…` and a
whitespace character, or a newline) or a paragraph (a blank line), at `max_chars`, when its block
is done, at the end of the stream, and at the latest an interval after its first character came.
Without the timer, where windows end depends only on the text, never on how it was split into
deltas. Each window goes with up to `context_chars` of the field's text before it (already
judged), so a phrase split across windows is still caught; each window is judged once, except
that a flagged window whose checker could not say where the violation starts is judged once more
alone (`Window.alone`), to tell a violation inside it from one that spans its start.

A structured field (a list or a dict: a search's queries, a code interpreter's outputs, a text's
citations) is judged as its text (`field_text`: its strings, one a line). `GatedField` is one
gated field of one block (or of the meta): its text so far, its windows and how far they passed
and were shown. Pure: no Django, no I/O, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .schema import META, checker_kind

UNITS = ("sentence", "paragraph", "chars")
# Fields judged before these were: their verdicts are stored under the block's own id. The others'
# go under "<block id>:<field>", so that a takeover knows how far each of them passed.
_PRIMARY_FIELDS = frozenset({"text", "arguments", "input", "output"})
PRUNE_AT = 32  # windows passed and shown before a field drops them
# Keys of a structured value that are not text anyone reads (an image's data, ids).
OPAQUE_KEYS = frozenset({"type", "url", "file_id", "container_id", "id", "image_url"})
# A citation's URL is read (a link's address is shown): only its kind and ids are not text.
CITATION_OPAQUE_KEYS = frozenset({"type", "file_id", "container_id", "id"})

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


def field_text(value: Any, opaque: frozenset[str] = OPAQUE_KEYS) -> str:
    """The text of a shown field's value: a string as it is; a list's or a dict's strings, one a
    line, in order (so that a streamed list that grows at its end gives text that grows at its
    end), but for the `opaque` keys of a dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text for text in (field_text(v, opaque) for v in value) if text)
    if isinstance(value, dict):
        return "\n".join(text for key, v in value.items() if key not in opaque
                         for text in (field_text(v, opaque),) if text)
    return ""


@dataclass(frozen=True, slots=True)
class Window:
    """One run of text to judge."""

    id: int
    block_id: str  # the block's id, or "<block id>:<field>" for a field judged apart
    field: str
    kind: str  # output | tool_arguments | tool_output
    start: int  # offsets in the field's text
    end: int
    text: str
    context: str  # up to context_chars of the field's text before `start`
    alone: bool = False  # judged once more without its context (see the module docstring)

    def judged_context(self) -> str:
        """The context the checker is given: none for a window judged alone."""
        return "" if self.alone else self.context


class GatedField:
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
        if done >= PRUNE_AT:
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


class WindowKeeper:
    """The gated fields of a view and their windows: cut as text grows, closed by the timer, at a
    block's end or the stream's, handed out once each (`take_windows`), awaited until judged. The
    safety gate (a subclass) decides what is shown; once it `stopped`, no window opens again."""

    def __init__(self, *, unit: str, max_chars: int, context_chars: int, interval: float,
                 passed: dict[tuple[str, str], int] | None) -> None:
        if unit not in UNITS:
            raise ValueError(f"safety window must be one of {', '.join(UNITS)}, got {unit!r}")
        self.unit = unit
        self.max_chars = max_chars
        self.context_chars = context_chars
        self.interval = interval
        self.stopped: Window | None = None  # the flagged window, once one was
        self.checked = 0  # windows handed out for a check
        self._prepassed = dict(passed or {})
        self._fields: dict[tuple[str, str], GatedField] = {}
        self._of_block: dict[str, list[GatedField]] = {}  # block id → its gated fields
        self._kinds: dict[str, str] = {META: META}  # block id → its kind
        self._windows: dict[int, GatedField] = {}  # window id → its field, while its verdict is awaited
        self._due: list[Window] = []
        self._open_since: dict[tuple[str, str], float] = {}
        self._ended: set[str] = set()  # blocks whose fields are done
        self._next_id = 0
        self._now = 0.0

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

    def _field(self, block_id: str, name: str) -> GatedField:
        key = (block_id, name)
        field = self._fields.get(key)
        if field is None:
            kind = checker_kind(self._kinds.get(block_id, ""), name)
            judged_as = block_id if name in _PRIMARY_FIELDS else f"{block_id}:{name}"
            field = self._fields[key] = GatedField(judged_as, name, kind, self._prepassed.get((judged_as, kind), 0))
            self._of_block.setdefault(block_id, []).append(field)
        return field

    def _cut(self, field: GatedField, *, close: bool = False) -> None:
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

    def _close(self, field: GatedField) -> None:
        if field.open and self.stopped is None:
            self._cut(field, close=True)

    def _close_block(self, block_id: str) -> None:
        self._ended.add(block_id)
        for field in self._of_block.get(block_id, ()):
            self._close(field)

"""Per-output-item state for the assembler: an item dict plus the growing pieces of it.

Text, arguments, code and the like arrive as deltas; they are kept as chunk lists and joined
only when a snapshot is materialised, so a 400,000-delta answer costs linear time. When a `.done`
event or the final Response supplies an authoritative value, it replaces the chunks.

Pure: no Django, no I/O.
"""

from __future__ import annotations

import copy
from typing import Any

from .textbuf import Piece, fold, join

# Where a content part keeps its text, by part type.
PART_TEXT_FIELD = {
    "output_text": "text", "refusal": "refusal", "reasoning_text": "text", "summary_text": "text",
}


class Chunks:
    """An append-only string built from deltas; `value` joins them (see `textbuf`).

    The list in `_parts` keeps its identity for the life of the object (joins and replacements
    happen in place), so a hot loop may hold `chunks._parts.append` across events.
    """

    __slots__ = ("_parts",)

    def __init__(self, initial: str = "") -> None:
        self._parts: list[Piece] = [initial] if initial else []

    @property
    def pieces(self) -> list[Piece]:
        """The list itself, for a hot loop's `append` and for sharing with a view block."""
        return self._parts

    def append(self, delta: str) -> None:
        self._parts.append(delta)

    def replace(self, value: str) -> None:
        self._parts[:] = [value] if value else ()

    def fold(self) -> None:
        """One compact piece, in place, without reading the text (see `textbuf.fold`)."""
        fold(self._parts)

    @property
    def value(self) -> str:
        # Later reads and joins start from the one piece a read leaves: linear overall.
        return join(self._parts)


class Part:
    """One content part (or reasoning summary part): its dict and its text chunks."""

    __slots__ = ("data", "field", "text")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = dict(data)
        self.field = PART_TEXT_FIELD.get(self.data.get("type", ""), "text")
        value = self.data.pop(self.field, "")
        self.text = Chunks(value if isinstance(value, str) else "")

    def materialize(self) -> dict[str, Any]:
        out = dict(self.data)
        out[self.field] = self.text.value
        return out


class Item:
    """One output item, addressed by its output index."""

    __slots__ = (
        "data", "index", "prefix", "parts", "summary", "buffers", "commands", "done",
        "_has_content", "_has_summary",
    )

    def __init__(self, data: dict[str, Any], index: int, prefix: str = "") -> None:
        self.index = index
        self.prefix = prefix  # view block ids start with it: several responses can share one view
        self.done = False
        self.parts: dict[int, Part] = {}
        self.summary: dict[int, Part] = {}
        self.buffers: dict[str, Chunks] = {}  # "arguments", "input", "code", ...
        self.commands: dict[int, Chunks] = {}  # shell_call action.commands
        self.data: dict[str, Any] = {}
        self.reset(data)

    @property
    def id(self) -> str | None:
        value = self.data.get("id")
        return value if isinstance(value, str) else None

    @property
    def type(self) -> str:
        value = self.data.get("type")
        return value if isinstance(value, str) else ""

    def reset(self, data: dict[str, Any]) -> None:
        """Take `data` as the item's state, absorbing its content and summary parts."""
        self.data = copy.copy(data)
        content = self.data.pop("content", None)
        summary = self.data.pop("summary", None)
        self.parts = {}
        self.summary = {}
        self.buffers = {}
        self.commands = {}
        if isinstance(content, list):
            self.parts = {i: Part(p) for i, p in enumerate(content) if isinstance(p, dict)}
            if len(self.parts) != len(content):  # keep odd content verbatim rather than lose it
                self.data["content"] = content
                self.parts = {}
        elif content is not None:
            self.data["content"] = content
        if isinstance(summary, list):
            self.summary = {i: Part(p) for i, p in enumerate(summary) if isinstance(p, dict)}
            if len(self.summary) != len(summary):
                self.data["summary"] = summary
                self.summary = {}
        elif summary is not None:
            self.data["summary"] = summary
        self._has_content = isinstance(content, list)
        self._has_summary = isinstance(summary, list)

    def part(self, index: int, *, summary: bool = False) -> Part | None:
        return (self.summary if summary else self.parts).get(index)

    def add_part(self, index: int, data: dict[str, Any], *, summary: bool = False) -> Part:
        part = Part(data)
        (self.summary if summary else self.parts)[index] = part
        if summary:
            self._has_summary = True
        else:
            self._has_content = True
        return part

    def buffer(self, field: str) -> Chunks:
        chunks = self.buffers.get(field)
        if chunks is None:
            initial = self.data.get(field)
            chunks = self.buffers[field] = Chunks(initial if isinstance(initial, str) else "")
        return chunks

    def command(self, index: int) -> Chunks:
        chunks = self.commands.get(index)
        if chunks is None:
            chunks = self.commands[index] = Chunks()
        return chunks

    def materialize(self) -> dict[str, Any]:
        out = dict(self.data)
        if self._has_content:
            out["content"] = [self.parts[i].materialize() for i in sorted(self.parts)]
        if self._has_summary:
            out["summary"] = [self.summary[i].materialize() for i in sorted(self.summary)]
        for field, chunks in self.buffers.items():
            out[field] = chunks.value
        if self.commands:
            action = dict(out.get("action") or {})
            commands = list(action.get("commands") or [])
            for i in sorted(self.commands):
                while len(commands) <= i:
                    commands.append("")
                commands[i] = self.commands[i].value
            action["commands"] = commands
            out["action"] = action
        return out

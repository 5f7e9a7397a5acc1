"""What a front end has been told of a request's view, and the steps that bring it up to date.

A request's view (streaming/view.py) only grows: blocks are appended, text is appended, states
move forward. Front-end protocols (AG-UI, the AI SDK's UI message stream) speak of the same things
as lifecycle steps: a message starts, its text grows, it ends; a tool call starts, its arguments
grow, it ends, its result comes. `Told` records how far one client has been told, part by part, and
`Told.advance(view, ended)` returns the steps from there to `view`, in view order. The steps depend
on what was told and on the view, never on how the view was built (which patches, coalesced how,
or which snapshot), so a client can be brought up to date from any view at least as new as what it
was told, and resumed from its `cursor()`: a short string that records `Told` exactly. A view
older than the cursor (a checkpoint behind the live runner) yields nothing until it catches up:
never a step twice.

Parts, in view order (every other block is the protocols' state, not a part):
    text        a "text" or "refusal" block: an assistant message
    reasoning   a reasoning summary (or reasoning text) block: a reasoning message in its span
    span        a reasoning item's block, bracketing its reasoning messages
    tool        a tool block with a name: a function, MCP or custom tool call, an MCP approval request

One message or tool call is open at a time (strict clients reject interleaving): starting a part
ends those still open. A run ends (`finish`) or pauses for MCP approvals (`interrupt`) with nothing
open; after a pause, the next run starts once the view moves on (someone answered).

Pure: no Django, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

TEXT, REASONING, SPAN, TOOL = "text", "reasoning", "span", "tool"
WAITING_FOR_APPROVAL = "waiting_for_approval"  # the view's meta status while approvals are awaited
AWAITING_APPROVAL = "awaiting_approval"  # an approval request block's state meanwhile
_STILL = frozenset({"in_progress", "streaming"})  # a block whose content may still grow
_RESULT_STATES = frozenset({"done", "completed", "failed", "incomplete"})

# A stage: "" nothing more to tell; "t" message open (n characters told); "s" span open;
# "a" tool call open (n argument characters told); "b" tool call ended, its result not told.
# ASCII digits, each number of a bounded length: a cursor is never a number int() refuses or a
# CPU cost (Python's limit on int() of long digit strings).
_CURSOR = re.compile(r"([0-9]{1,9})(f?)\.([0-9]{1,9})((?:\.[0-9]{1,9}(?:t[0-9]{1,15}|s|a[0-9]{1,15}|b))*)")
_ENTRY = re.compile(r"\.([0-9]{1,9})([tsab])([0-9]*)")
MAX_PARTS = 10_000


class CursorError(ValueError):
    """A cursor (an event id) this module did not write."""


@dataclass(frozen=True, slots=True)
class ToldPart:
    key: str  # the view block's id
    kind: str
    id: str  # the protocol's id: a message, span or tool call id
    name: str = ""  # a tool's name
    span: str | None = None  # a reasoning message's span (its block id)
    approval: bool = False  # an MCP approval request: a person answers it; it has no result


class ToldStep(NamedTuple):
    kind: str  # run_start | start | delta | end | result | interrupt | finish
    part: ToldPart | None
    value: Any  # run_start: the run's index; delta, result: text; interrupt: [(ToldPart, block)];
    # finish: the request's status
    cursor: str  # what the client has been told once it has this step: its resume point


def classify(block: dict[str, Any], scope: str) -> ToldPart | None:
    """The part a block is, or None (state only). `scope` makes ids unique across requests."""
    kind, key = block.get("kind"), str(block["id"])
    item = block.get("item_id")
    base = str(item) if item else f"{scope}:{key}"
    tail = key.rsplit("-", 1)[-1] if "-" in key else ""
    if kind in ("text", "refusal"):
        return ToldPart(key, TEXT, base if tail in ("", "c0") else f"{base}:{tail}")
    if kind == "reasoning":
        if block.get("tool") == "reasoning":
            return ToldPart(key, SPAN, base)
        return ToldPart(key, REASONING, f"{base}:{tail or 's0'}", span=key.rsplit("-", 1)[0])
    if kind == "tool" and isinstance(block.get("name"), str) and block["name"]:
        call = block.get("call_id")
        return ToldPart(key, TOOL, str(call) if call else base, name=block["name"],
                    approval=block.get("tool") == "mcp_approval_request")
    return None


def tool_arguments(block: dict[str, Any]) -> str:
    value = block.get("arguments", block.get("input"))
    return value if isinstance(value, str) else ""


def tool_result(block: dict[str, Any]) -> str | None:
    """A tool call's result, once it has one."""
    if block.get("state") not in _RESULT_STATES:
        return None
    output = block.get("output")
    if isinstance(output, str):
        return output
    error = block.get("error")
    if error:
        return error if isinstance(error, str) else str(error)
    return None


def parts_of(view: dict[str, Any], scope: str) -> list[tuple[ToldPart, dict[str, Any]]]:
    found = []
    for block in view.get("blocks") or ():
        part = classify(block, scope)
        if part is not None:
            found.append((part, block))
    return found


def approval_round(key: str) -> str:
    """Blocks of one response share a prefix (`r<n>-`, none for the first): one approval round."""
    return key[: key.index("o")] if "o" in key else ""


class Told:
    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.run = -1  # -1: nothing told; 2k: run k open; 2k + 1: run k paused (approvals) or finished
        self.finished = False
        self.stages: list[list[Any]] = []  # per part, in view order: [stage, n]

    # --- cursors ------------------------------------------------------------------------------

    def cursor(self) -> str:
        open_ = "".join(f".{i}{code}{n if code in 'ta' else ''}" for i, (code, n) in enumerate(self.stages) if code)
        return f"{self.run}{'f' if self.finished else ''}.{len(self.stages)}{open_}"

    @classmethod
    def from_cursor(cls, cursor: str, scope: str) -> Told:
        match = _CURSOR.fullmatch(cursor.strip())
        if match is None:
            raise CursorError(f"not a cursor: {cursor[:80]!r}")
        told = cls(scope)
        told.run, told.finished, count = int(match[1]), bool(match[2]), int(match[3])
        if count > MAX_PARTS or told.run > 2 * MAX_PARTS:
            raise CursorError("a cursor past any request's size")
        told.stages = [["", 0] for _ in range(count)]
        for index, code, n in _ENTRY.findall(match[4]):
            if int(index) >= count:
                raise CursorError("a cursor naming a part it did not start")
            told.stages[int(index)] = [code, int(n or 0)]
        return told

    @classmethod
    def paused_at(cls, view: dict[str, Any], approval_ids: set[str], scope: str) -> Told:
        """What a client was told when the run paused for these approvals (it answers them now):
        every part up to the last of them, and one paused run per approval round up to there."""
        told = cls(scope)
        parts = parts_of(view, scope)
        last = max((i for i, (p, _) in enumerate(parts) if p.approval and p.id in approval_ids), default=-1)
        rounds = {approval_round(p.key) for p, _ in parts[: last + 1] if p.approval}
        told.stages = [["", 0] for _ in range(last + 1)]
        told.run = 2 * len(rounds) - 1 if rounds else -1
        return told

    # --- steps ----------------------------------------------------------------------------------

    def advance(self, view: dict[str, Any], ended: str | None) -> list[ToldStep]:
        """The steps from what was told to `view`; `ended`: the request's status once it ended."""
        if self.finished:
            return []
        meta = view.get("meta") or {}
        waiting = ended is None and meta.get("status") == WAITING_FOR_APPROVAL
        steps: list[ToldStep] = []
        if self.run % 2:  # not started, or paused: a run starts once there is something new to say
            if self.run >= 0 and waiting:
                return []
            self.run += 1
            self._emit(steps, "run_start", None, self.run // 2)
        parts = parts_of(view, self.scope)
        for index, (part, block) in enumerate(parts):
            if index == len(self.stages):
                self._close_open(steps, parts, keep_span=part.span)
                self.stages.append(["a" if part.kind == TOOL else ("s" if part.kind == SPAN else "t"), 0])
                self._emit(steps, "start", part)
            self._catch_up(index, part, block, steps, ended)
        self._close_spans(steps, parts, ended)
        if ended is not None:
            self._close_open(steps, parts, keep_span=None)
            self.finished = True
            self.run += 1
            self._emit(steps, "finish", None, ended)
        elif waiting:
            asked = [(p, b) for p, b in parts if p.approval and b.get("state") == AWAITING_APPROVAL]
            if asked:
                self._close_open(steps, parts, keep_span=None)
                self.run += 1
                self._emit(steps, "interrupt", None, asked)
        return steps

    def _emit(self, steps: list[ToldStep], kind: str, part: ToldPart | None, value: Any = None) -> None:
        steps.append(ToldStep(kind, part, value, self.cursor()))

    def _catch_up(self, index: int, part: ToldPart, block: dict[str, Any], steps: list[ToldStep],
                  ended: str | None) -> None:
        stage = self.stages[index]
        if stage[0] == "t":
            text = block.get("text") or ""
            if len(text) > stage[1]:
                delta, stage[1] = text[stage[1]:], len(text)
                self._emit(steps, "delta", part, delta)
            if block.get("state") not in _STILL and len(text) >= stage[1]:
                stage[0] = ""
                self._emit(steps, "end", part)
        elif stage[0] == "a":
            arguments = tool_arguments(block)
            if len(arguments) > stage[1]:
                delta, stage[1] = arguments[stage[1]:], len(arguments)
                self._emit(steps, "delta", part, delta)
            if block.get("state") not in _STILL or ended is not None:
                self._end(index, part, steps)
        if stage[0] == "b":
            result = tool_result(block)
            if result is not None:
                stage[0] = ""
                self._emit(steps, "result", part, result)

    def _end(self, index: int, part: ToldPart, steps: list[ToldStep]) -> None:
        self.stages[index][:] = ["b" if part.kind == TOOL and not part.approval else "", 0]
        self._emit(steps, "end", part)

    def _close_open(self, steps: list[ToldStep], parts: list[tuple[ToldPart, dict[str, Any]]],
                    keep_span: str | None) -> None:
        """End every open message and tool call, then every open span but `keep_span`."""
        for index, stage in enumerate(self.stages):
            if stage[0] in ("t", "a") and index < len(parts):
                self._end(index, parts[index][0], steps)
        for index, stage in enumerate(self.stages):
            if stage[0] == "s" and index < len(parts) and parts[index][0].key != keep_span:
                stage[0] = ""
                self._emit(steps, "end", parts[index][0])

    def _close_spans(self, steps: list[ToldStep], parts: list[tuple[ToldPart, dict[str, Any]]],
                     ended: str | None) -> None:
        """A span ends once its item is done and none of its messages is open."""
        for index, stage in enumerate(self.stages):
            if stage[0] != "s" or index >= len(parts):
                continue
            span, block = parts[index]
            if block.get("state") in _STILL and ended is None:
                continue
            if any(self.stages[i][0] == "t" and parts[i][0].span == span.key
                   for i in range(index + 1, min(len(parts), len(self.stages)))):
                continue
            stage[0] = ""
            self._emit(steps, "end", span)

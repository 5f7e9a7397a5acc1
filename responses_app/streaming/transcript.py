"""One logical request's live view: the only writer of its `ViewModel`.

A logical request may span several upstream responses (each tool round's continuation is a new
response drawn into the same view, its blocks prefixed `r<round>-`) and several segments (a
resume after a drop, a reconcile). The transcript owns the view, the current response's pipeline
(decoder + assembler) and the counters of the finished ones. The relay feeds it bytes and tells
it what the relay itself did (a tool ran, the request ended without a terminal event); every
method returns the view ops it caused, so the relay only moves values around: it never writes the
view and never looks at an event's type. Pure: no Django, no I/O, no clock.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .assembler import MAX_ITEMS, Applied, Assembler, AssemblerStats
from .gate import SafetyGate, Window
from .item_events import MAX_ANSWER_CHARS
from .pipeline import StreamPipeline
from .resumed import committed_arguments, keep_committed
from .sse import SSEDecoder
from .usage import Usage
from .view import Op, ViewModel
from .vocabulary import CANCELLED, ERROR, RESPONSE_FINAL_STATUSES, TERMINAL_EVENT_BY_STATUS, UNKNOWN

_ANSWER_KINDS = frozenset({"text", "refusal"})  # answer text a person reads (time to first token)
_RELAY_ENDINGS = frozenset({CANCELLED, UNKNOWN, ERROR})  # outcomes no upstream event reports
TAKEOVER_REVISION_GAP = 1_000_000  # far more ops than a runner publishes between two commits
HANDED_OVER = "handoff"  # the reason of the checkpoint a stopping runner commits as it lets go


class Ops(NamedTuple):
    base: int  # the revision the ops apply on
    ops: list[Op]
    revision: int  # the revision after them
    windows: list[Window] = []  # safety: text due for a check (never mutated: a shared default is safe)


class Step(NamedTuple):
    """What one chunk of upstream bytes did."""

    events: list[dict[str, Any]]  # parsed, in arrival order (for the raw event log)
    change: Ops
    boundary: bool  # a part, item or response ended: send and commit now
    first_text: bool  # the request's first answer text
    first_tool: bool  # the request's first tool event
    terminal: bool  # the current response is in a terminal state
    raw: list[str]  # each event's `data` as it came (the event log stores these, not a re-encoding)
    limited: bool = False  # the current response just passed its bound of output items or of text


class Verdicted(NamedTuple):
    change: Ops
    action: str  # passed | withheld | retracted
    first_text: bool  # the request's first answer text came out


class Transcript:
    def __init__(self, *, max_event_bytes: int = 8 * 1024 * 1024, hold_window: int = 8,
                 max_output_items: int = MAX_ITEMS, secrets: tuple[str, ...] = (),
                 max_answer_chars: int = MAX_ANSWER_CHARS) -> None:
        """`secrets`: masked wherever the upstream's error messages reach the view (masking.py).
        `max_answer_chars`: streamed characters of the whole answer, every round together."""
        self.view = ViewModel()  # what viewers see
        self._inner = self.view  # what the upstream said: the same view unless a safety gate sits between
        self.gate: SafetyGate | None = None
        self.round = 0
        self._max_event_bytes = max_event_bytes
        self._hold_window = hold_window
        self._max_items = max_output_items
        self.secrets = secrets
        self._finished_stats: list[AssemblerStats] = []
        self._malformed_before = 0
        self._usage = Usage()
        self._text_seen = self._tool_seen = False
        self.assembler = Assembler(hold_window=hold_window, view=self.view, max_items=max_output_items, secrets=secrets)
        self.assembler.room = max_answer_chars
        self.pipeline = StreamPipeline(max_event_bytes=max_event_bytes, assembler=self.assembler)

    def guard(self, gate: SafetyGate) -> None:
        """Put a safety gate between the upstream and the viewers (before anything is fed): the
        assembler writes a view of its own, and `view` holds only what the gate lets through."""
        self.gate = gate
        gate.view = self.view
        self._inner = ViewModel()
        room = self.assembler.room
        self.assembler = Assembler(hold_window=self._hold_window, view=self._inner, max_items=self._max_items,
                                   secrets=self.secrets)
        self.assembler.room = room
        self.pipeline = StreamPipeline(max_event_bytes=self._max_event_bytes, assembler=self.assembler)

    # --- the current response ---------------------------------------------------------------

    @property
    def response_id(self) -> str | None:
        return self.assembler.response_id

    @property
    def status(self) -> str | None:
        return self.assembler.status

    @property
    def terminal(self) -> bool:
        return self.assembler.terminal

    @property
    def limited(self) -> bool:
        """The current response passed its bound of output items: what came after was dropped."""
        return self.assembler.limited

    @property
    def limit_reason(self) -> str:
        """Which bound `limited` passed: "max_output_items" or "max_answer_chars"."""
        return self.assembler.limit_reason

    @property
    def judged(self) -> bool:
        """Behind a safety gate, every window of the text so far has its verdict (see SafetyGate.judged)."""
        return self.gate is None or self.gate.judged

    @property
    def settled(self) -> bool:
        """The response itself ended (completed, failed, incomplete, cancelled). An `error` event
        alone is terminal but not settled: a `response.failed` that follows it decides."""
        return self.assembler.status in RESPONSE_FINAL_STATUSES

    @property
    def last_sequence_number(self) -> int | None:
        return self.assembler.last_sequence_number

    def assume_response_id(self, response_id: str) -> None:
        """A taken-over request: the id stored by the runner that died (another than the log's
        ended response's: a continuation confirmed before any of its events were logged)."""
        if response_id and self.terminal and response_id != self.response_id:
            self.next_response()
        self.assembler.response_id = response_id or self.assembler.response_id

    # --- upstream bytes ---------------------------------------------------------------------

    def feed(self, chunk: bytes, now: float | None = None) -> Step:
        """`now`: when the chunk came (a safety window closes at the latest an interval after)."""
        if now is not None and self.gate is not None:
            self.gate.tick(now)
        return self._step(*self.pipeline.feed(chunk))

    def feed_event(self, data: str, now: float | None = None) -> Step:
        """One event's JSON without SSE framing (WebSocket mode: a frame is an event); `now` as
        for `feed`."""
        if now is not None and self.gate is not None:
            self.gate.tick(now)
        return self._step(*self.pipeline.feed_event(data))

    def finish(self, *, hold: bool = False) -> Step:
        """The stream closed: the end-of-stream rule of StreamPipeline.finish, replay's too
        (`hold`: a resume may follow; `end` applies what is still held)."""
        return self._step(*self.pipeline.finish(hold=hold))

    def restart_decoder(self) -> None:
        """Before a resume: a partial event from the dropped connection never completes."""
        self.pipeline.decoder = SSEDecoder(max_event_bytes=self._max_event_bytes)

    def _step(self, events: list[dict[str, Any]], applied: Applied, raw: list[str]) -> Step:
        first_tool = applied.first_tool and not self._tool_seen
        self._tool_seen |= first_tool
        change = self.take_ops()
        if self.gate is None:
            first_text = applied.first_text and not self._text_seen
            self._text_seen |= first_text
        else:  # behind a gate, the first answer text people see
            first_text = self._shows_first_text(change.ops)
        return Step(events, change, applied.boundary, first_text, first_tool, applied.terminal, raw, applied.limited)

    def _shows_first_text(self, ops: list[Op]) -> bool:
        if self._text_seen:
            return False
        view = self.view
        for op in ops:
            if op[0] == "append" or (op[0] == "set" and op[2].get("text")) or (op[0] == "add" and op[1].get("text")):
                block_id = op[1]["id"] if op[0] == "add" else op[1]
                if view.has(block_id) and view.block(block_id).get("kind") in _ANSWER_KINDS and view.text(block_id):
                    self._text_seen = True
                    return True
        return False

    def apply_final(self, response: dict[str, Any]) -> Ops:
        """The upstream's own answer about how the response ended (reconcile, cancel)."""
        status = response.get("status")
        kind = TERMINAL_EVENT_BY_STATUS.get(status if isinstance(status, str) else "", "response.failed")
        if status in RESPONSE_FINAL_STATUSES:
            self.assembler.release_held()
            self.assembler.feed({"type": kind, "response": response})
        return self.take_ops()

    def restore(self, rounds: list[tuple[int, bytes]], committed_revision: int, reason: str = "", *,
                committed: dict[str, Any] | None = None) -> None:
        """Rebuild from the raw event log (round, SSE bytes) of a runner that died or let go
        (`reason`: its last checkpoint's), with what the log lost of the `committed` view
        (resumed.py). A dead runner may have published patches no log holds: revisions skip past
        them (a tab holding one resyncs). One that handed over (HANDED_OVER) committed them all."""
        for round_, data in rounds:
            if round_ != self.round:
                self.next_response(round_)
            self.pipeline.feed(data)
        keep_committed(self._inner, committed)
        if self.gate is not None:  # the windows not judged before are judged now
            self.gate.push(self._inner.take_ops()[1])
        self.view.take_ops()
        self.view.revision = (committed_revision if reason == HANDED_OVER
                              else max(self.view.revision, committed_revision) + TAKEOVER_REVISION_GAP)
        self.view.take_ops()

    # --- rounds and tools -------------------------------------------------------------------

    def next_response(self, round_: int | None = None) -> None:
        """A continuation: a new upstream response drawn into the same view."""
        self._finished_stats.append(self.assembler.stats)
        self._malformed_before += self.pipeline.malformed + self.pipeline.oversized
        self._usage.response_ended(self._inner)
        self.round = self.round + 1 if round_ is None else round_
        room = self.assembler.room  # the bound of streamed text is the whole answer's
        self.assembler = Assembler(hold_window=self._hold_window, view=self._inner, block_prefix=f"r{self.round}-",
                                   max_items=self._max_items, secrets=self.secrets)
        self.assembler.room = room
        self.pipeline = StreamPipeline(max_event_bytes=self._max_event_bytes, assembler=self.assembler)

    def function_calls(self) -> list[dict[str, Any]]:
        """The current response's function calls with a call id (complete once it is terminal)."""
        return [committed_arguments(call, self._inner, self.assembler.block_id_for(call.get("id")))
                for call in self.assembler.function_calls()]

    def tools_started(self) -> Ops:
        self._inner.set_meta({"status": "waiting_for_tool"})
        return self.take_ops()

    def tool_running(self, item_id: str | None) -> Ops:
        block_id = self.assembler.block_id_for(item_id)
        if block_id:
            self._inner.set(block_id, {"state": "running"})
        return self.take_ops()

    def tool_done(self, item_id: str | None, output: str) -> Ops:
        block_id = self.assembler.block_id_for(item_id)
        if block_id:
            self._inner.set(block_id, {"state": "done", "output": output})
        return self.take_ops()

    def approval_requests(self) -> list[str]:
        """The ids of the current response's MCP approval requests (each waits for a person)."""
        return [item["id"] for item in self.assembler.output_items("mcp_approval_request")
                if isinstance(item.get("id"), str) and item["id"]]

    def approvals_awaited(self, approval_ids: list[str]) -> Ops:
        self._inner.set_meta({"status": "waiting_for_approval", "activity": "approval"})
        for approval_id in approval_ids:
            block_id = self.assembler.block_id_for(approval_id)
            if block_id:
                self._inner.set(block_id, {"state": "awaiting_approval"})
        return self.take_ops()

    def approval_decided(self, approval_id: str, approve: bool) -> Ops:
        block_id = self.assembler.block_id_for(approval_id)
        if block_id:
            self._inner.set(block_id, {"state": "approved" if approve else "denied"})
        return self.take_ops()

    def retrying(self, status: int, attempt: int, of: int) -> Ops:
        """The upstream refused with a retryable status; the relay asks again (`meta.retry`, which
        a page shows as "Retrying (429, 2 of 3)…") until the next response begins."""
        self._inner.set_meta({"retry": {"status": status, "attempt": attempt, "of": of}})
        return self.take_ops()

    def retry_over(self) -> Ops:
        if self._inner.meta.get("retry"):
            self._inner.set_meta({"retry": None})
        return self.take_ops()

    def tools_finished(self) -> Ops:
        self._inner.set_meta({"status": "in_progress"})
        return self.take_ops()

    # --- the end ----------------------------------------------------------------------------

    def end(self, status: str, error: tuple[str, str] | None = None, *, reason: str | None = None,
            over_response: bool = False) -> Ops:
        """The relay's outcome. A status no upstream event reported (cancelled, unknown, a
        transport error, the relay's own deadline: incomplete with a `reason`) is shown as such;
        a settled response keeps its own, unless the request went on past it (`over_response`:
        stopped while an approval was awaited, or its writes failed). Behind a safety gate the
        relay's own words go to viewers as they are, after what the gate held is released."""
        self.assembler.release_held()  # nothing more comes: what arrived behind a gap is shown
        fields: dict[str, Any] = {}
        if (status in _RELAY_ENDINGS or reason) and (over_response or not self.settled):
            fields["status"] = status
            if error:
                fields["error"] = {"code": error[0], "message": error[1]}
            if reason:
                fields["incomplete_reason"] = reason
        if self.gate is not None:
            self.gate.push(self._inner.take_ops()[1])
            self.gate.finish()
        if fields:
            self.view.set_meta(fields)
        return self.take_ops()

    # --- the safety gate --------------------------------------------------------------------

    def safety_tick(self, now: float) -> Ops:
        """Windows open for the checkpoint interval close (the relay's timer)."""
        if self.gate is not None:
            self.gate.tick(now)
        return self.take_ops()

    def safety_close(self) -> Ops:
        """The stream ended: every open window closes."""
        if self.gate is not None:
            self.take_ops()
            self.gate.close_all()
        return self.take_ops()

    def safety_verdict(self, window_id: int, flagged: bool, start: int | None = None) -> Verdicted:
        """A window's verdict (`start`: where a violation starts in its context + text, if known):
        the ops it caused, what was done with the window, and whether it released the request's
        first answer text (buffered mode's time to first token)."""
        assert self.gate is not None
        action = self.gate.verdict(window_id, flagged, start)
        change = self.take_ops()
        return Verdicted(change, action, self._shows_first_text(change.ops))

    def take_ops(self) -> Ops:
        gate = self.gate
        if gate is None:
            base, ops = self.view.take_ops()
            return Ops(base, ops, self.view.revision)
        inner = self._inner.take_ops()[1]
        if inner:
            gate.push(inner)
        base, ops = self.view.take_ops()
        return Ops(base, ops, self.view.revision, gate.take_windows())

    def counters(self) -> dict[str, Any]:
        stats = [*self._finished_stats, self.assembler.stats]
        return {
            "events": sum(s.events for s in stats), "duplicates": sum(s.duplicates for s in stats),
            "out_of_order": sum(s.held for s in stats), "gaps": sum(s.gaps for s in stats),
            "unknown_events": sum(s.unknown for s in stats),
            "malformed_events": self._malformed_before + self.pipeline.malformed + self.pipeline.oversized,
            "last_sequence_number": self.assembler.last_sequence_number,
        }

    def reported_usage(self, usage: dict[str, Any]) -> Ops:
        """The provider's usage of a response it reports with no terminal event (a cancelled one)."""
        self._inner.set_meta({"usage": usage})
        return self.take_ops()

    def usage(self) -> Any:
        """One response: its usage as reported; several: the sums; estimated where none (usage.py)."""
        return self._usage.of_request(self._inner)

    def final_text(self) -> str:
        view = self.view
        return "\n\n".join(view.text(b["id"]) for b in view.to_dict()["blocks"] if b["kind"] == "text")

    def compact(self) -> None:
        """Join the current response's text pieces into one compact piece, shared by its parts
        and their view blocks (a few bytes per character instead of a str object per delta)."""
        self.assembler.share_text()

    def snapshot(self) -> dict[str, Any]:
        """The current response's Response snapshot (for checkpoints): it joins each text once,
        for the snapshot and the view alike, so take it before the view. Behind a safety gate,
        each text is what viewers were shown of it."""
        response = self.assembler.response()
        if self.gate is not None:
            for item, (item_block, parts, summaries) in zip(response["output"], self.assembler.output_blocks(),
                                                           strict=True):
                self._redact(item, item_block, parts, summaries)
            meta = self.view.meta
            if response.get("error"):
                response["error"] = meta.get("error") or None
            details = response.get("incomplete_details")
            if isinstance(details, dict) and details.get("reason") != meta.get("incomplete_reason"):
                response["incomplete_details"] = None
        return response

    def _redact(self, item: dict[str, Any], item_block: str, parts: list[str], summaries: list[str]) -> None:
        view = self.view
        for key, block_ids in (("content", parts), ("summary", summaries)):
            entries = item.get(key)
            if isinstance(entries, list):
                for entry, block_id in zip(entries, block_ids, strict=False):
                    field = "refusal" if entry.get("type") == "refusal" else "text"
                    if isinstance(entry.get(field), str):
                        entry[field] = view.text(block_id) if view.has(block_id) else ""
                    if entry.get("annotations"):  # citations: as far as they were shown
                        entry["annotations"] = list(view.block(block_id).get("annotations") or []) \
                            if view.has(block_id) else []
        shown = view.block(item_block) if view.has(item_block) else {}
        for field in ("arguments", "input", "output", "code"):
            if isinstance(item.get(field), str):
                if field == "code":  # a code interpreter's code is its block's text, kept apart from the block
                    value: Any = view.text(item_block) if view.has(item_block) else ""
                else:
                    value = shown.get(field)
                item[field] = value if isinstance(value, str) else ""
        self._redact_tool_fields(item, shown)

    @staticmethod
    def _redact_tool_fields(item: dict[str, Any], shown: dict[str, Any]) -> None:
        """The other fields a tool block shows (streaming/projection.tool_fields), as shown: its
        name and server label, a query, commands, a patch's operation, outputs, a result, an error
        (not an image's data)."""
        for field in ("name", "server_label"):
            if isinstance(item.get(field), str) and item[field]:
                kept = shown.get(field)
                item[field] = kept if isinstance(kept, str) else ""
        for field in ("queries", "outputs", "result", "error", "output"):
            value = item.get(field)
            if value in (None, "", [], {}) or (field == "output" and isinstance(value, str)):
                continue  # a string output was handled with the arguments
            if field == "result" and item.get("type") == "image_generation_call":
                continue
            kept = shown.get(field)
            item[field] = kept if kept is not None else type(value)()
        action = item.get("action")
        if isinstance(action, dict):
            action = item["action"] = dict(action)
            if action.get("query"):
                action["query"] = shown.get("query") or ""
            if action.get("queries"):  # not shown on their own: kept as far as the same words were
                seen = {shown.get("query"), *(shown.get("queries") or [])}
                action["queries"] = [q for q in action["queries"] if isinstance(q, str) and q in seen]
            if action.get("commands"):
                action["commands"] = list(shown.get("commands") or [])
            if isinstance(action.get("command"), list) and action["command"]:
                joined = " ".join(map(str, action["command"]))
                action["command"] = action["command"] if shown.get("commands") == [joined] else []
        operation = item.get("operation")
        if isinstance(operation, dict):
            shown_op = shown.get("operation")
            kept_op: dict[str, Any] = shown_op if isinstance(shown_op, dict) else {}
            item["operation"] = {**operation, "path": kept_op.get("path") or "", "diff": kept_op.get("diff") or ""}

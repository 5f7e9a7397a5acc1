"""Sequences of views as a request's followers see them: the simulator's captures fed through the
relay's own Transcript in chunks, with the relay's tool and approval steps between responses."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from responses_app.streaming.transcript import Ops, Transcript
from responses_app.streaming.view import apply_op

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sim"
EMPTY: dict[str, Any] = {"revision": 0, "meta": {"response_id": None, "status": None}, "blocks": []}


class Views:
    """Applies a transcript's ops to a plain view (as a follower's reducer does) and records it."""

    def __init__(self) -> None:
        self.transcript = Transcript()
        self.view = copy.deepcopy(EMPTY)
        self.seen: list[dict[str, Any]] = []

    def apply(self, change: Ops) -> None:
        for op in change.ops:
            apply_op(self.view, op)
        self.view["revision"] = change.revision
        if change.ops:
            self.seen.append(copy.deepcopy(self.view))

    def feed(self, name: str, chunk: int) -> None:
        body = (CAPTURES / f"{name}.sse").read_bytes()
        for start in range(0, len(body), chunk):
            self.apply(self.transcript.feed(body[start:start + chunk]).change)
        self.apply(self.transcript.finish().change)

    def run_tools(self, outputs: dict[str, str]) -> None:
        t = self.transcript
        self.apply(t.tools_started())
        for call in t.function_calls():
            self.apply(t.tool_running(call.get("id")))
            self.apply(t.tool_done(call.get("id"), outputs.get(call["call_id"], '{"ok":true}')))
        self.apply(t.tools_finished())
        t.next_response()

    def ask_approvals(self) -> list[str]:
        asked = self.transcript.approval_requests()
        self.apply(self.transcript.approvals_awaited(asked))
        return asked

    def answer(self, approvals: dict[str, bool]) -> None:
        for approval_id, approve in approvals.items():
            self.apply(self.transcript.approval_decided(approval_id, approve))
        self.apply(self.transcript.tools_finished())
        self.transcript.next_response()


def scenario(name: str, chunk: int = 97) -> Views:
    """A whole request: one capture, or a capture, its tool round and the continuation."""
    views = Views()
    views.feed(name, chunk)
    if (CAPTURES / f"{name}.tool-result.sse").exists():
        views.run_tools({})
        views.feed(f"{name}.tool-result", chunk)
    return views


def approval_scenario(chunk: int = 97, approve: bool = True) -> tuple[Views, list[str], int]:
    """sim-mcp-approval, waiting (the index of the first waiting view), answered, then an answer."""
    views = Views()
    views.feed("sim-mcp-approval", chunk)
    asked = views.ask_approvals()
    waiting = len(views.seen) - 1
    views.answer(dict.fromkeys(asked, approve))
    views.feed("sim-text", chunk)
    return views, asked, waiting


def timeline(views: Views, final: str = "completed") -> Iterator[tuple[dict[str, Any], str, bool]]:
    """(view, status, ended) as a follower gets them: every view, the last one ended."""
    for index, view in enumerate(views.seen):
        last = index == len(views.seen) - 1
        yield view, final if last else "streaming", last

"""Replay captured SSE bytes through the live relay's own pipeline: a `Transcript`, fed chunk
by chunk and finished as the runner does when a stream closes (one end-of-stream rule, see
pipeline.py), its view ops drained after every chunk.

Used by `manage.py replay`, by tests against real captures and the official SDK, and by the
benchmarks. Pure: no Django, no I/O beyond what the caller hands in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .assembler import MAX_ITEMS, AssemblerStats
from .pipeline import Problem
from .transcript import Transcript


@dataclass
class ReplayResult:
    response: dict[str, Any]
    view: dict[str, Any]
    status: str | None
    terminal: bool
    events: int
    stats: AssemblerStats
    problems: list[Problem]
    patches: int  # view ops produced, as the relay would coalesce and send them


def replay_bytes(
    data: bytes, chunk_size: int | None = None, *, hold_window: int = 8, max_output_items: int = MAX_ITEMS
) -> ReplayResult:
    transcript = Transcript(hold_window=hold_window, max_output_items=max_output_items)
    ops = 0
    step = chunk_size or len(data) or 1
    events = 0
    for start in range(0, len(data), step):
        fed = transcript.feed(data[start:start + step])  # the relay drains ops after every chunk
        events += len(fed.events)
        ops += len(fed.change.ops)
    fed = transcript.finish()
    events += len(fed.events)
    ops += len(fed.change.ops)
    assembler = transcript.assembler
    return ReplayResult(
        response=assembler.response(),
        view=transcript.view.to_dict(),
        status=assembler.status,
        terminal=assembler.terminal,
        events=events,
        stats=assembler.stats,
        problems=transcript.pipeline.problems,
        patches=ops,
    )

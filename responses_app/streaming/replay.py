"""Replay captured SSE bytes through exactly the pipeline the live relay runs.

Used by `manage.py replay`, by tests against real captures and the official SDK, and by the
benchmarks. Pure: no Django, no I/O beyond what the caller hands in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .assembler import AssemblerStats
from .pipeline import Problem, StreamPipeline


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
    data: bytes, chunk_size: int | None = None, *, hold_window: int = 8
) -> ReplayResult:
    pipeline = StreamPipeline(hold_window=hold_window)
    view = pipeline.assembler.view
    ops = 0
    step = chunk_size or len(data) or 1
    events = 0
    for start in range(0, len(data), step):
        events += len(pipeline.feed(data[start:start + step]).events)
        ops += len(view.take_ops()[1])  # the relay drains ops after every chunk
    events += len(pipeline.finish().events)
    ops += len(view.take_ops()[1])
    assembler = pipeline.assembler
    return ReplayResult(
        response=assembler.response(),
        view=view.to_dict(),
        status=assembler.status,
        terminal=assembler.terminal,
        events=events,
        stats=assembler.stats,
        problems=pipeline.problems,
        patches=ops,
    )

"""The end of a stream applies what arrived: events held behind a sequence gap are applied when the
stream ends without a terminal event (replay, and the relay's `Transcript.end`), unless a resume
is coming to fill the gap (`finish(hold=True)`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from responses_app.streaming.assembler import Assembler
from responses_app.streaming.replay import replay_bytes
from responses_app.streaming.transcript import Transcript
from tests.conftest import REAL_STREAMS, real_stream_files, require_real_streams

PHASE = "vercel-ai__phase-commentary-final-answer.sse"
FIRST_MESSAGE = "Got it — I’ll quickly check reliable, up-to-date sources"


def blocks_of(body: bytes) -> list[bytes]:
    return [block + b"\n\n" for block in body.split(b"\n\n") if block.strip()]


def events_of(blocks: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for block in blocks for line in block.decode().splitlines()
            if line.startswith("data: {")]


def first_text(view: dict[str, Any]) -> str:
    return next((b["text"] for b in view["blocks"] if b["kind"] == "text"), "")


def phase_blocks() -> list[bytes]:
    require_real_streams()
    return blocks_of((REAL_STREAMS / PHASE).read_bytes())


@pytest.mark.parametrize("share", [0.5, 0.6, 0.7, 0.8, 0.9])
def test_a_cut_capture_replays_the_whole_first_message(share: float) -> None:
    blocks = phase_blocks()
    kept = blocks[:int(len(blocks) * share)]
    assert any(b'"response.output_text.done"' in b for b in kept)  # it arrived: it must show
    result = replay_bytes(b"".join(kept))
    assert first_text(result.view).startswith(FIRST_MESSAGE)
    assert not result.terminal and result.stats.gaps >= 1  # the holes are counted, not hidden


def test_a_resume_keeps_what_is_held_until_the_gap_fills() -> None:
    blocks = phase_blocks()
    transcript = Transcript()
    transcript.feed(b"".join(blocks[:10]))
    transcript.finish(hold=True)  # the runner: a resume may follow
    assert transcript.assembler.held_count > 0 and first_text(transcript.view.to_dict()) == "Got it"
    transcript.restart_decoder()
    transcript.feed(b"".join(blocks[6:]))  # a resume starting before the gap fills nothing new here
    transcript.finish(hold=True)
    assert transcript.terminal and first_text(transcript.view.to_dict()).startswith(FIRST_MESSAGE)


def test_the_relays_end_applies_what_is_held() -> None:
    blocks = phase_blocks()
    transcript = Transcript()
    transcript.feed(b"".join(blocks[:10]))
    transcript.finish(hold=True)
    change = transcript.end("unknown", ("outcome_unknown", "lost"))
    assert change.ops and first_text(transcript.view.to_dict()).startswith(FIRST_MESSAGE)
    assert transcript.view.meta["status"] == "unknown"
    assert transcript.counters()["gaps"] >= 1


# --- any prefix of any capture -------------------------------------------------------------------


def applied_in_order(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The prefix's events applied one by one in their numbers' order (arrival order where they
    carry none), nothing held: what the end of the stream must show."""
    numbered = [e for e in events if isinstance(e.get("sequence_number"), int)]
    ordered = sorted(numbered, key=lambda e: e["sequence_number"]) if len(numbered) == len(events) else events
    assembler = Assembler(hold_window=10**9)
    for event in ordered:
        assembler.feed(event)
    assembler.release_held()
    return assembler.view.to_dict()


def texts(view: dict[str, Any]) -> list[str]:
    return [b.get("text", "") for b in view["blocks"] if b["kind"] in ("text", "refusal", "reasoning")]


CAPTURES = real_stream_files()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(capture=st.sampled_from(CAPTURES or [REAL_STREAMS / PHASE]), share=st.floats(0, 1),
       chunk=st.sampled_from([None, 1, 7, 4096]))
@example(capture=REAL_STREAMS / PHASE, share=0.6, chunk=None)  # the gaps this rule is about
@example(capture=REAL_STREAMS / PHASE, share=0.35, chunk=1)
def test_any_prefix_of_any_capture_yields_the_text_of_the_applied_prefix(
        capture: Path, share: float, chunk: int | None) -> None:
    require_real_streams()
    blocks = blocks_of(capture.read_bytes())
    cut = round(len(blocks) * share)
    result = replay_bytes(b"".join(blocks[:cut]), chunk_size=chunk)
    assert texts(result.view) == texts(applied_in_order(events_of(blocks[:cut])))

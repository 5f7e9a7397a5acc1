"""Every field of a tool block that a page shows passes the safety gate, on the real captures:
what the model wrote as `tool_arguments`, what came back as `tool_output`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from responses_app.streaming.gate import NOTICE_ID, SafetyGate, Window
from responses_app.streaming.transcript import Transcript
from responses_app.templatetags.relay_tags import tool_details, tool_title
from tests.conftest import real_stream_files

WROTE = {"name", "server_label", "arguments", "input", "query", "queries", "commands", "operation", "text"}


def shown(block: dict[str, Any]) -> list[str]:
    """What the tool block's template (responses_app/blocks/tool.html) shows of a tool block."""
    title = tool_title({k: v for k, v in block.items() if k != "name"})
    words = [title.split(": ", 1)[1]] if ": " in title else []
    words += [value for _label, value in tool_details(block)]
    if block.get("text"):
        words.append(block["text"])
    return words


def tool_blocks(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in view["blocks"] if b["kind"] == "tool"]  # an image block shows its image


def feed(path: Path, mode: str) -> tuple[Transcript, list[Window]]:
    transcript = Transcript()
    transcript.guard(SafetyGate(mode))
    windows: list[Window] = []
    for block in path.read_bytes().replace(b"\r\n", b"\n").split(b"\n\n"):
        if block.strip():
            windows += transcript.feed(block + b"\n\n", 0.0).change.windows
    windows += transcript.safety_close().windows
    return transcript, windows


CAPTURES = [p for p in real_stream_files()
            if any(shown(b) for b in tool_blocks(feed(p, "progressive")[0].view.to_dict()))]


@pytest.mark.skipif(not CAPTURES, reason="../shared/real-streams is absent on this machine")
@pytest.mark.parametrize("capture", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_buffered_shows_no_tool_field_before_it_passed_and_all_of_it_after(capture: Path) -> None:
    transcript, windows = feed(capture, "buffered")
    upstream = {b["id"]: b for b in tool_blocks(transcript._inner.to_dict())}
    for block in tool_blocks(transcript.view.to_dict()):
        assert shown(block) == [], f"{block['tool']} shows unjudged {shown(block)}"
    judged = {(w.block_id.split(":")[0], w.field) for w in windows}
    for block_id, block in upstream.items():
        for name in ("arguments", "input", "query", "queries", "commands", "operation", "output", "outputs",
                     "result", "error", "text"):
            if block.get(name) and shown({"tool": block["tool"], name: block[name]}):
                assert (block_id, name) in judged, f"{block['tool']}.{name} was never judged"
    for window in windows:
        expected = "tool_arguments" if window.field in WROTE else "tool_output"
        if window.block_id.split(":")[0] in upstream:
            assert window.kind == expected, (window.field, window.kind)
        transcript.safety_verdict(window.id, False)
    after = {b["id"]: b for b in tool_blocks(transcript.view.to_dict())}
    for block_id, block in upstream.items():
        assert shown(after[block_id]) == shown(block), "everything that passed is shown"
    upstream_items = [i for i in transcript.assembler.response()["output"] if i.get("type") != "message"]
    snapshot_items = [i for i in transcript.snapshot()["output"] if i.get("type") != "message"]
    assert snapshot_items == upstream_items, "the snapshot keeps every tool field that passed"


@pytest.mark.skipif(not CAPTURES, reason="../shared/real-streams is absent on this machine")
@pytest.mark.parametrize("capture", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_progressive_retracts_a_flagged_tool_field(capture: Path) -> None:
    transcript, windows = feed(capture, "progressive")
    tool_ids = {b["id"] for b in tool_blocks(transcript._inner.to_dict())}
    flagged = next(w for w in windows if w.block_id.split(":")[0] in tool_ids and w.text.strip())
    for window in windows:
        if window is flagged:
            transcript.safety_verdict(window.id, True)
            break
        transcript.safety_verdict(window.id, False)
    view = transcript.view.to_dict()
    block = next(b for b in view["blocks"] if b["id"] == flagged.block_id.split(":")[0])
    assert flagged.text.strip() not in "\n".join(shown(block)), f"{flagged.field} still shows what was flagged"
    notice = next(b for b in view["blocks"] if b["id"] == NOTICE_ID)
    assert notice["state"] == "retracted"

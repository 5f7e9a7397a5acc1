"""`manage.py replay` as a user runs it: a real subprocess, exit codes, output formats."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "sim"


def replay(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", "replay", *args], cwd=ROOT, input=stdin.decode() if stdin
                          else None, capture_output=True, text=True, timeout=60)


def test_json_prints_the_assembled_response_and_exits_0() -> None:
    result = replay(str(FIXTURES / "sim-citations.sse"), "--json")
    assert result.returncode == 0, result.stderr
    response = json.loads(result.stdout)
    assert response["status"] == "completed"
    message = [i for i in response["output"] if i["type"] == "message"][0]
    assert message["content"][0]["annotations"]


def test_view_prints_the_view_model_with_chunked_input() -> None:
    whole = json.loads(replay(str(FIXTURES / "sim-reasoning.sse"), "--view").stdout)
    chunked = json.loads(replay(str(FIXTURES / "sim-reasoning.sse"), "--view", "--chunk-size", "7").stdout)
    assert whole == chunked
    assert {b["kind"] for b in whole["blocks"]} >= {"reasoning", "text"}


def test_a_stream_without_terminal_exits_3_with_the_snapshot_so_far() -> None:
    body = (FIXTURES / "sim-text.sse").read_bytes()
    cut = b"\n\n".join(body.split(b"\n\n")[:12]) + b"\n\n"
    result = replay("-", "--json", stdin=cut)
    assert result.returncode == 3
    assert "without a terminal event" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert json.loads(result.stdout)["output"][0]["content"][0]["text"]


def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    assert replay(str(tmp_path / "missing.sse")).returncode == 2
    garbage = tmp_path / "garbage.sse"
    garbage.write_bytes(b"this is not an event stream")
    assert replay(str(garbage)).returncode == 2


def test_repeat_reports_events_per_second() -> None:
    result = replay(str(FIXTURES / "sim-text.sse"), "--repeat", "5")
    assert result.returncode == 0
    assert "events/s" in result.stderr


def test_malformed_events_are_reported_not_fatal(tmp_path: Path) -> None:
    body = (FIXTURES / "sim-text.sse").read_bytes()
    blocks = body.split(b"\n\n")
    broken = b"\n\n".join(blocks[:5] + [b'data: {"type": "response.output_text.delta", "delta": '] + blocks[5:])
    path = tmp_path / "broken.sse"
    path.write_bytes(broken)
    result = replay(str(path))
    assert result.returncode == 0
    assert "malformed" in result.stderr

"""The browser's wire.js reads the frames the relay sends exactly as the server's reducer does:
every simulator capture streamed through the pipeline, the Coalescer, the FlushPolicy and the
encoder, applied by node and by `view.apply_patch`, reaches the same view; the revision rule and
protocol-1 patch objects hold in both; a frame of no known shape is refused by both.

Node runs the browser module (tests/js/wire_parity.mjs). Skipped without node, unless CI=true.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from responses_app.streaming.coalescer import Coalescer
from responses_app.streaming.pipeline import StreamPipeline
from responses_app.streaming.policies import FlushPolicy
from responses_app.streaming.view import apply_patch
from responses_app.streaming.wire import WireError, decode, encode_patch
from tests.node import node_or_skip

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "js" / "wire_parity.mjs"
CAPTURES = sorted((ROOT / "tests" / "fixtures" / "sim").glob("*.sse"))
EMPTY: dict[str, Any] = {"revision": 0, "meta": {"response_id": None, "status": None}, "blocks": []}


def frames_of(body: bytes, chunk: int) -> tuple[list[str], dict[str, Any]]:
    """The frames a viewer gets for a stream read `chunk` bytes at a time, 10 ms apart, and the view."""
    pipeline = StreamPipeline(hold_window=8)
    view = pipeline.assembler.view
    coalescer, policy = Coalescer(), FlushPolicy(0.05, max_wait=0.1, min_chars=32)
    frames: list[str] = []
    now = 0.0

    def flush() -> None:
        patch = coalescer.flush()
        policy.flushed(now, sent=patch is not None)
        if patch is not None:
            frames.append(encode_patch(patch, view.order()).decode())

    def drain() -> None:
        base, ops = view.take_ops()
        if ops:
            before = coalescer.pending_chars
            urgent = coalescer.push(base, ops, view.revision)
            if policy.push(now, changed=True, chars=coalescer.pending_chars - before) or urgent:
                flush()
        elif policy.due(now):
            flush()

    for start in range(0, len(body), chunk):
        now += 0.01
        pipeline.feed(body[start:start + chunk])
        drain()
    pipeline.finish()
    drain()
    flush()
    return frames, view.to_dict()


def python_applies(snapshot: dict[str, Any], frames: list[str]) -> tuple[dict[str, Any], list[Any]]:
    view = copy.deepcopy(snapshot)
    applied: list[Any] = []
    for frame in frames:
        try:
            message = decode(frame)
        except WireError:
            applied.append("error")
            continue
        applied.append(apply_patch(view, message) if message["type"] == "patch" else message["type"])
    return view, applied


def cases() -> list[dict[str, Any]]:
    found = []
    for capture in CAPTURES:
        for chunk in (7, 4096):
            frames, view = frames_of(capture.read_bytes(), chunk)
            found.append({"name": f"{capture.stem} by {chunk}", "snapshot": EMPTY, "frames": frames, "view": view})
    two = {"revision": 4, "meta": {"status": "in_progress"},
           "blocks": [{"id": "a", "kind": "text", "text": "x"}, {"id": "b", "kind": "reasoning", "text": ""}]}
    found.append({"name": "revision rule, protocol 1, other messages, bad frames", "snapshot": two, "frames": [
        "[6,1,\"late\"]",  # a gap: not applied
        "[5,1,\"think\"]",  # to the last block, b
        "[5,1,\"again\"]",  # a duplicate
        orjson.dumps({"type": "patch", "base": 5, "revision": 7,
                      "ops": [["append", "a", "y"], ["set", "b", {"state": "done"}]]}).decode(),
        '{"type":"ping","revision":7}',
        '[9,2,["add",{"id":"c","kind":"text","text":""}],"é😀\\n\\"q\\""]',
        '[10,1,["meta",{"status":"completed"}]]',
        "[11,0]", "[\"11\",1]", "{}", "not json",
    ], "view": None})
    return found


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    node = node_or_skip("wire parity")
    corpus = cases()
    path = tmp_path_factory.mktemp("wire") / "cases.json"
    path.write_text(json.dumps(corpus))
    done = subprocess.run([node, str(SCRIPT), str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return corpus, json.loads(done.stdout)


def test_every_capture_reaches_the_same_view_in_the_browser_and_on_the_server(results: Any) -> None:
    corpus, node = results
    assert len(corpus) == 2 * len(CAPTURES) + 1 and len(CAPTURES) >= 15
    for case, browser in zip(corpus[:-1], node[:-1], strict=True):
        server, applied = python_applies(case["snapshot"], case["frames"])
        assert server == case["view"], case["name"]
        assert browser["view"] == server, case["name"]
        assert all(applied) and all(a is True for a in browser["applied"]), case["name"]


def test_the_revision_rule_old_patches_and_bad_frames_alike(results: Any) -> None:
    corpus, node = results
    case, browser = corpus[-1], node[-1]
    server, applied = python_applies(case["snapshot"], case["frames"])
    assert applied == [False, True, False, True, "ping", True, True, "error", "error", "error", "error"]
    assert [a if not isinstance(a, dict) else "error" for a in browser["applied"]] == applied
    assert browser["view"] == server
    assert server["revision"] == 10 and server["meta"]["status"] == "completed"
    assert [b["text"] for b in server["blocks"]] == ["xy", "think", 'é😀\n"q"']


def test_text_to_the_last_block_travels_as_the_text_alone(results: Any) -> None:
    corpus, _ = results
    frames = [json.loads(f) for case in corpus[:-1] if case["name"].startswith("sim-long") for f in case["frames"]]
    assert sum(isinstance(op, str) for f in frames for op in f[2:]) > 0.9 * len(frames)

"""livesocket.js, the page's websocket, across a server that stops. Node runs the browser module
with a fake WebSocket and timers (tests/js/livesocket_*.mjs). Skipped without node, unless CI=true.

- A tab whose socket the server closed because it stops (a deploy: 1012, or 1001) reconnects at
  once, spread over SOON_MS: the stopping process closes its sockets a few at a time
  (project/serve.py) and the others are ready. Any other close, or a socket that never opened,
  keeps the backoff (300-500 ms first).
- A tab asked to move first (`{"type":"moving"}`, viewers/guard.py `move_sockets`) makes before
  it breaks: it opens a new socket beside the old one, reads the old one until the new one's first
  message, then reads only the new one and closes the old (1000), so the text never pauses. A new
  socket that fails or stays silent is dropped and the old one goes on; an old one closed first
  hands over to the new one without a retry.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.node import node_or_skip

SCRIPTS = Path(__file__).resolve().parents[1] / "js"


def run(script: str) -> Any:
    node = node_or_skip(script)
    return json.loads(subprocess.run([node, str(SCRIPTS / script)], capture_output=True, text=True, check=True,
                                     timeout=60).stdout)


def test_a_socket_closed_by_a_stopping_server_reconnects_at_once() -> None:
    delays = run("livesocket_retry.mjs")
    for name in ("restart", "going away"):
        assert all(0 <= d <= 100 for d in delays[name]), (name, delays[name])
        assert max(delays[name]) - min(delays[name]) > 20, f"{name}: spread, not all at once"
    for name in ("dropped", "server error", "restart, never opened"):
        assert all(300 <= d <= 500 for d in delays[name]), (name, delays[name])


def test_a_socket_asked_to_move_opens_a_new_one_and_switches_at_its_first_message() -> None:
    cases = run("livesocket_move.mjs")
    moved = cases["moved"]
    assert moved["got"] == ["a", "b", "c", "snapshot", "d"], "the old socket read until the new one spoke, then not"
    assert (moved["reads"], moved["closed"][0], moved["states"]) == (1, 1000, [True]), moved
    assert cases["once"]["made"] == 2, "a second `moving` opens no third socket"
    for name in ("failed", "silent"):
        case = cases[name]
        assert (case["reads"], case["got"], case["states"], case["retries"]) == (0, ["a", "b"], [True], 0), (name, case)
    assert cases["silent"]["closed"][1] is not None, "a silent new socket is closed"
    for name in ("old_closed_first", "adopted_connecting"):
        case = cases[name]
        assert (case["reads"], case["got"], case["retries"], case["made"]) == (1, ["a", "snapshot"], 0, 2), (name, case)
    assert cases["old_closed_first"]["states"] == [True], "an open new socket takes over without a flicker"
    assert cases["adopted_connecting"]["whileConnecting"] is False
    assert cases["adopted_connecting"]["states"] == [True, False, True]

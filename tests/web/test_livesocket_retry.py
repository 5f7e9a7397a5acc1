"""A tab whose socket the server closed because it stops (a deploy: 1012, or 1001) reconnects at
once, spread over livesocket.js's SOON_MS: the stopping process closes its sockets a few at a
time (project/serve.py) and the others are ready. Any other close, or a socket that never
opened, keeps the backoff (300-500 ms first). Node runs the browser module
(tests/js/livesocket_retry.mjs). Skipped without node, unless CI=true."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.node import node_or_skip

SCRIPT = Path(__file__).resolve().parents[1] / "js" / "livesocket_retry.mjs"


def test_a_socket_closed_by_a_stopping_server_reconnects_at_once() -> None:
    node = node_or_skip("livesocket retry")
    delays = json.loads(subprocess.run([node, str(SCRIPT)], capture_output=True, text=True, check=True,
                                       timeout=60).stdout)
    for name in ("restart", "going away"):
        assert all(0 <= d <= 100 for d in delays[name]), (name, delays[name])
        assert max(delays[name]) - min(delays[name]) > 20, f"{name}: spread, not all at once"
    for name in ("dropped", "server error", "restart, never opened"):
        assert all(300 <= d <= 500 for d in delays[name]), (name, delays[name])

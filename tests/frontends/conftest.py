"""A real relay server for the front-end tests: project.serve (uvicorn, project.asgi) in a subprocess
against a file SQLite database in a temp dir, the embedded simulator as its upstream, two users
with bearer tokens (RELAY_API_TOKENS), and their session logins for the cookie path."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.node import node_or_skip
from tests.servers import free_port, migrate, stop

ROOT = Path(__file__).resolve().parents[2]
JS = Path(__file__).resolve().parent / "js"  # the AI SDK's own chat client, driven by node
TOKENS = {"alice": "alice-token-0123456789abcdef0123456789", "bob": "bob-token-0123456789abcdef0123456789ab"}


@dataclass
class Relay:
    url: str
    db_path: Path
    log_path: Path

    def client(self, user: str = "alice", **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKENS[user]}"},
                            timeout=httpx.Timeout(30.0), **kwargs)

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """The server's database, read directly: an oracle the streams cannot fake."""
        with sqlite3.connect(self.db_path, timeout=20) as db:
            return db.execute(sql, params).fetchall()

    def row(self, request_id: str) -> dict[str, Any]:
        rows = self.query("SELECT status, final_text, viewer_connections, reconnects, cancels, owner_id, "
                          "conversation_id FROM responses_app_responserequest WHERE id = ?",
                          request_id.replace("-", ""))
        assert rows, f"no request {request_id}"
        keys = ("status", "final_text", "viewer_connections", "reconnects", "cancels", "owner_id", "conversation_id")
        return dict(zip(keys, rows[0], strict=True))

    def wait_status(self, request_id: str, statuses: tuple[str, ...], timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            row = self.row(request_id)
            if row["status"] in statuses:
                return row
            if time.monotonic() > deadline:
                raise AssertionError(f"request {request_id} stayed {row['status']}")
            time.sleep(0.05)

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True,
                   text=True, timeout=120)


@pytest.fixture(scope="session")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    tmp = tmp_path_factory.mktemp("frontends-relay")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    db_path = tmp / "db.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db_path}",
        "SIMULATOR_BASE_URL": "",  # the embedded simulator, reached in-process
        "SIMULATOR_ENABLED": "true",
        "OPENAI_BASE_URL": "",
        "OPENAI_API_KEY": "",
        "DJANGO_ENV": "development",
        "DEBUG": "false",
        "RELAY_MAX_CONCURRENT_PER_USER": "20",
        "RELAY_SUBMIT_RATE": "1000/m",
        "RELAY_FLUSH_INTERVAL_MS": "20",
        "RELAY_CHECKPOINT_INTERVAL_MS": "100",
        "RELAY_API_TOKENS": ",".join(f"{user}={token}" for user, token in TOKENS.items()),
        "REDIS_URL": "",
        "PYTHONUNBUFFERED": "1",
    }
    migrate(env)
    creation = "; ".join(f"User.objects.create_user({name!r}, password='pw')" for name in TOKENS)
    _manage(env, "shell", "-c", f"from django.contrib.auth import get_user_model; User = get_user_model(); {creation}")
    log_path = tmp / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "project.serve", "--port", str(port), "--no-access-log"],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        server = Relay(url=url, db_path=db_path, log_path=log_path)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{url}/accounts/login/", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the relay server did not start:\n{server.log_tail()}")
                time.sleep(0.05)
            yield server
        finally:
            stop(proc)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def node() -> str:
    """node, with the `ai` package installed in JS (`npm ci` when node_modules is missing)."""
    node = node_or_skip("AI SDK")
    if not (JS / "node_modules" / "ai" / "package.json").exists():
        npm = shutil.which("npm")
        if npm is None:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail("CI must have npm for the AI SDK test")
            pytest.skip("npm is not installed")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, capture_output=True, timeout=300)
    return node

"""A conversation survives a restart of the server: the real server (Daphne, project.asgi) with its
embedded simulator reached in-process, on a port of its own, restarted between two turns on
another port. The simulator forgets every response on restart, as a provider forgets expired
ones, so the second turn's chain is gone and it is sent once more with the whole conversation."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers import ROOT, free_port, migrate, stop

PASSWORD = "pw"


def server_env(db_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db_path}",
        "SIMULATOR_ENABLED": "true",
        "SIMULATOR_BASE_URL": "",  # the default: the embedded simulator, in-process
        "OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "REDIS_URL": "",
        "PYTHONUNBUFFERED": "1",
    }


def start(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "project.serve", "--port", str(port)],
                            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)  # type: ignore[arg-type]
            raise RuntimeError(f"the server did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)


def logged_in(base: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=10)
    page = client.get("/accounts/login/").text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token, "the login form carries a CSRF token"
    response = client.post("/accounts/login/", data={"username": "alice", "password": PASSWORD,
                                                     "csrfmiddlewaretoken": token.group(1)})
    assert response.status_code in (200, 302) and "sessionid" in client.cookies
    client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
    return client


def submit_and_wait(client: httpx.Client, payload: dict[str, Any], timeout_s: float = 30) -> dict[str, Any]:
    created = client.post("/api/requests", json=payload)
    assert created.status_code == 201, created.text
    request_id = created.json()["id"]
    deadline = time.monotonic() + timeout_s
    while True:  # the JSON API's status: polled, bounded
        detail = client.get(f"/api/requests/{request_id}").json()
        if detail["status"] not in ("pending", "streaming"):
            return detail
        assert time.monotonic() < deadline, f"request still {detail['status']}"
        time.sleep(0.1)


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    db_path = tmp_path / "db.sqlite3"
    env = server_env(db_path)
    migrate(env)
    subprocess.run([sys.executable, "manage.py", "shell", "-c", "from django.contrib.auth import get_user_model; "
                    f"get_user_model().objects.create_user('alice', password={PASSWORD!r})"],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)
    yield env, db_path


def test_a_conversation_goes_on_after_a_restart_on_another_port(database: tuple[dict[str, str], Path],
                                                                tmp_path: Path) -> None:
    env, db_path = database
    log = tmp_path / "server.log"
    fast = {"sim.tokens_per_s": "0"}
    port = free_port()
    proc = start(env, port, log)
    try:
        first = submit_and_wait(logged_in(f"http://127.0.0.1:{port}"),
                                {"input": "Tell me a story", "model": "sim-text", "metadata": fast,
                                 "background": False, "client_request_id": "turn-1"})
    finally:
        stop(proc)  # type: ignore[arg-type]
    assert first["status"] == "completed", first

    port = free_port()  # another address: the embedded simulator follows the server anywhere
    proc = start(env, port, log)
    try:
        second = submit_and_wait(logged_in(f"http://127.0.0.1:{port}"),
                                 {"input": "And then?", "model": "sim-text", "metadata": fast, "background": False,
                                  "conversation": first["conversation"], "client_request_id": "turn-2"})
    finally:
        stop(proc)  # type: ignore[arg-type]
    assert second["status"] == "completed", second
    assert second["view"]["meta"].get("error") is None, "nobody is shown an error"
    with sqlite3.connect(db_path) as db:
        segments = db.execute("SELECT kind, outcome FROM responses_app_segment WHERE request_id = ? "
                              "ORDER BY \"index\"", (second["id"].replace("-", ""),)).fetchall()
        turns = db.execute("SELECT count(*) FROM responses_app_responserequest").fetchone()[0]
        chain = db.execute("SELECT last_response_id FROM responses_app_conversation").fetchone()[0]
    assert segments == [("initial", "http_404"), ("full_context", "completed")]
    assert turns == 2, "each turn is one logical request, the retry included"
    assert chain == second["response_id"], "the conversation's chain is repaired"

"""The scaled-out configuration for real: PostgreSQL, Redis channel layer, two web (project.serve)
processes and a `relayworker` process. A request submitted to one web process is run by
the worker and watched live through the other web process's websocket."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from responses_app.streaming.view import apply_patch
from responses_app.streaming.wire import PROTOCOL, decode
from tests.conftest import IN_CI
from tests.metrics_helpers import parse, total, value

ROOT = Path(__file__).resolve().parents[2]
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
pytestmark = pytest.mark.services


def _reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def services_env(simulator_url: str) -> Iterator[dict[str, str]]:
    if not (_reachable(5432) and _reachable(6379)):
        if IN_CI:
            pytest.fail("CI must have PostgreSQL on 5432 and Redis on 6379")
        pytest.skip("PostgreSQL or Redis is not running here")
    import psycopg
    import redis

    name = f"relay_scaled_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:  # type: ignore[arg-type]
        conn.execute(f'CREATE DATABASE "{name}"')
    redis_db = 11
    redis.Redis(host="127.0.0.1", port=6379, db=redis_db).flushdb()
    env = {
        **os.environ,
        "DJANGO_ENV": "development",
        "DEBUG": "false",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{name}",
        "REDIS_URL": f"redis://127.0.0.1:6379/{redis_db}",
        "RELAY_INPROCESS_RUNNER": "false",
        "SIMULATOR_BASE_URL": simulator_url,
        "OPENAI_BASE_URL": "",
        "OPENAI_API_KEY": "",
        "PYTHONUNBUFFERED": "1",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True,
                   capture_output=True)
    try:
        yield env
    finally:
        redis.Redis(host="127.0.0.1", port=6379, db=redis_db).flushdb()
        with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:  # type: ignore[arg-type]
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def cluster(services_env: dict[str, str]) -> Iterator[dict[str, Any]]:
    script = (
        "from django.contrib.auth import get_user_model; from django.contrib.sessions.backends.db import SessionStore;"
        "u = get_user_model().objects.create_user('scaled', password='pw');"
        "s = SessionStore(); s['_auth_user_id'] = str(u.pk);"
        "s['_auth_user_backend'] = 'django.contrib.auth.backends.ModelBackend';"
        "s['_auth_user_hash'] = u.get_session_auth_hash(); s.create(); print(s.session_key)"
    )
    session = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=services_env,
                             check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    ports = [_free_port(), _free_port()]
    procs = [
        subprocess.Popen([sys.executable, "-m", "project.serve", "--port", str(port)], cwd=ROOT, env=services_env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for port in ports
    ]
    procs.append(subprocess.Popen([sys.executable, "manage.py", "relayworker"], cwd=ROOT,
                                  env=services_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        deadline = time.monotonic() + 30
        for port in ports:
            while not _reachable(port):
                assert time.monotonic() < deadline, "the web process did not start"
                assert all(p.poll() is None for p in procs), "a server process died"
                time.sleep(0.05)
        yield {"ports": ports, "session": session, "env": services_env}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _client(port: int, session: str) -> httpx.Client:
    token = "x" * 32
    return httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10,
                        cookies={"sessionid": session, "csrftoken": token},
                        headers={"X-CSRFToken": token})


def test_submit_on_one_process_watch_on_another(cluster: dict[str, Any]) -> None:
    import websockets

    web1, web2 = cluster["ports"]
    with _client(web1, cluster["session"]) as client:
        created = client.post("/api/requests", json={
            "input": "Tell me something", "model": "sim-text", "client_request_id": "scaled-1",
            "metadata": {"sim.tokens_per_s": "80", "sim.seed": "3"}})
        assert created.status_code == 201, created.text
        again = client.post("/api/requests", json={"input": "Tell me something", "model": "sim-text",
                                                   "client_request_id": "scaled-1"})
        assert again.status_code == 200 and again.json()["id"] == created.json()["id"]
    request_id = created.json()["id"]

    async def watch() -> tuple[dict[str, Any], dict[str, Any], int]:
        url = f"ws://127.0.0.1:{web2}/ws/requests/{request_id}/?v={PROTOCOL}"
        view: dict[str, Any] | None = None
        patches = 0
        async with websockets.connect(url, origin=f"http://127.0.0.1:{web2}",
                                      additional_headers={"Cookie": f"sessionid={cluster['session']}"}) as ws:
            async with asyncio.timeout(40):
                while True:
                    message = decode(await ws.recv())
                    if message["type"] == "snapshot":
                        view = message["view"]
                    elif message["type"] == "patch":
                        assert view is not None
                        patches += 1
                        if message["revision"] > view["revision"] and not apply_patch(view, message):
                            await ws.send('{"type":"snapshot"}')
                    elif message["type"] == "terminal":
                        assert view is not None
                        return message, view, patches

    terminal, view, patches = asyncio.run(watch())
    assert terminal["status"] == "completed"
    with _client(web1, cluster["session"]) as client:
        detail = client.get(f"/api/requests/{request_id}").json()
    assert detail["status"] == "completed"
    text = "".join(b["text"] for b in view["blocks"] if b["kind"] == "text")
    assert text and text == "".join(b["text"] for b in detail["view"]["blocks"] if b["kind"] == "text")
    # The patch lag crosses processes: web2 runs no runner, so every sample it has came through the
    # fan-out, from the worker's upstream arrival to web2's websocket send.
    samples = parse(httpx.get(f"http://127.0.0.1:{web2}/metrics", timeout=10).text)
    assert value(samples, "relay_patch_lag_seconds_count") >= 1
    assert 0 < value(samples, "relay_patch_lag_seconds_sum") / value(samples, "relay_patch_lag_seconds_count") < 5
    assert value(samples, "relay_viewer_connections_total") == 1
    assert total(samples, "relay_requests_total") == 0, "counted where it ended: in the worker"

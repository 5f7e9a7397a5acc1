"""Websocket hardening against a real Daphne server through a real client (`websockets`): exact
origins, 4404 for unknown paths with no traceback, sockets per user (4429, no leaked slot), the
per-socket frame budget, one cancel written per request, 4401 on logout and on session expiry."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from responses_app.limits import FrameBudget
from responses_app.viewers.cursor import RESYNC, Cursor
from responses_app.viewers.request import RequestConsumer
from tests.servers import stop
from tests.test_security_production import free_port, serve

ROOT = Path(__file__).resolve().parent.parent
USERS = ("alice", "bob", "carol", "dave", "erin")
SETUP = """
import json
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from responses_app import services
from responses_app.models import ResponseRequest
out = {}
for name in %(users)r:
    user = get_user_model().objects.create_user(name, password="pw")
    def session(expiry=None):
        s = SessionStore()
        s["_auth_user_id"] = str(user.pk)
        s["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
        s["_auth_user_hash"] = user.get_session_auth_hash()
        if expiry:
            s.set_expiry(expiry)
        s.create()
        return s.session_key
    done, _ = services.request_create(owner=user, input="x", model="sim-text", client_request_id=name + "-done")
    ResponseRequest.objects.filter(pk=done.pk).update(status="completed")
    live, _ = services.request_create(owner=user, input="x", model="sim-long", client_request_id=name + "-live",
        params={"background": True, "metadata": {"sim.tokens_per_s": "3", "sim.seed": "1"}})
    out[name] = {"session": session(), "done": str(done.pk), "live": str(live.pk)}
print("SETUP " + json.dumps(out))
"""


@contextmanager
def served(tmp: Path, setup: str, **settings: str) -> Iterator[dict[str, Any]]:
    """The demo's server (project.serve) with the embedded simulator, on a SQLite file of its own,
    after `setup` (a `manage.py shell` script that prints "SETUP <json>") made its users."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DJANGO_ENV": "development", "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
           "SIMULATOR_ENABLED": "true", "SIMULATOR_BASE_URL": f"{url}/simulator/v1", "OPENAI_BASE_URL": "",
           "OPENAI_API_KEY": "", "REDIS_URL": "", **settings, "PYTHONUNBUFFERED": "1"}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=120)
    shell = subprocess.run([sys.executable, "manage.py", "shell", "-c", setup], cwd=ROOT,
                           env=env, check=True, capture_output=True, text=True, timeout=120)
    users = json.loads(next(line for line in shell.stdout.splitlines() if line.startswith("SETUP "))[6:])
    proc, _ = serve(env, tmp / "server.log", port=port)
    try:
        yield {"url": url, "port": port, "users": users, "log": tmp / "server.log", "db": tmp / "db.sqlite3",
               "env": env}
    finally:
        stop(proc)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with served(tmp_path_factory.mktemp("ws-server"), SETUP % {"users": USERS}, RELAY_MAX_SOCKETS_PER_USER="3",
                RELAY_WS_FRAME_RATE="10", RELAY_WS_FRAME_BURST="20") as running:
        yield running


def ws_url(server: dict[str, Any], path: str) -> str:
    return f"ws://127.0.0.1:{server['port']}{path}"


def opener(server: dict[str, Any], path: str, session: str, origin: str | None = "default") -> Any:
    own = f"http://127.0.0.1:{server['port']}"
    return connect(ws_url(server, path), origin=own if origin == "default" else origin,  # type: ignore[arg-type]
                   additional_headers={"Cookie": f"sessionid={session}"}, open_timeout=10)


async def close_code(ws: ClientConnection, timeout: float = 10) -> int | None:
    """Read until the server closes; its close code."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                await ws.recv()
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None


async def first_message(ws: ClientConnection) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.recv(), 10))  # type: ignore[no-any-return]


@pytest.fixture
async def sockets() -> AsyncIterator[list[ClientConnection]]:
    opened: list[ClientConnection] = []
    yield opened
    for ws in opened:
        await ws.close()


async def test_origin_must_match_scheme_host_and_port(server: dict[str, Any]) -> None:
    alice = server["users"]["alice"]
    path = f"/ws/requests/{alice['done']}/"
    async with opener(server, path, alice["session"]) as ws:
        assert (await first_message(ws))["type"] == "snapshot"
    port = server["port"]
    for origin in (f"http://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port}", f"http://localhost:{port}",
                   "http://evil.example", "null", None):
        with pytest.raises(InvalidStatus) as refused:
            async with opener(server, path, alice["session"], origin=origin):
                pass
        assert refused.value.response.status_code == 403, origin


@pytest.mark.parametrize("path", ["/ws/nothing/", "/ws/requests/not-a-uuid/", "/ws/requests/", "/x%00y"])
async def test_unknown_paths_close_4404(server: dict[str, Any], path: str) -> None:
    async with opener(server, path, server["users"]["alice"]["session"]) as ws:
        assert await close_code(ws) == 4404


async def test_sockets_per_user_are_limited_and_never_leak(server: dict[str, Any],
                                                           sockets: list[ClientConnection]) -> None:
    bob = server["users"]["bob"]
    path = f"/ws/requests/{bob['done']}/"
    for _ in range(3):
        sockets.append(await opener(server, path, bob["session"]))
        assert (await first_message(sockets[-1]))["type"] == "snapshot"
    async with opener(server, path, bob["session"]) as extra:
        assert await close_code(extra) == 4429
    erin = server["users"]["erin"]
    async with opener(server, f"/ws/requests/{erin['done']}/", erin["session"]) as other:
        assert (await first_message(other))["type"] == "snapshot", "another user's sockets are their own"
    await sockets.pop().close()  # a clean close frees its slot ...
    sockets[0].transport.abort()  # ... and so does a connection that just dies
    sockets.pop(0)
    accepted = 0
    deadline = time.monotonic() + 10
    while accepted < 2 and time.monotonic() < deadline:
        ws = await opener(server, path, bob["session"])
        try:
            assert json.loads(await ws.recv())["type"] == "snapshot"
        except ConnectionClosed:  # 4429: the dead connection's slot is not free yet
            await asyncio.sleep(0.05)
            continue
        sockets.append(ws)
        accepted += 1
    assert accepted == 2


async def test_a_flood_of_frames_is_cut_off_and_the_server_stays_responsive(server: dict[str, Any]) -> None:
    carol = server["users"]["carol"]
    latencies: list[float] = []
    stop_probe = asyncio.Event()

    async def probe() -> None:
        async with httpx.AsyncClient(base_url=server["url"]) as client:
            while not stop_probe.is_set():
                start = time.monotonic()
                assert (await client.get("/accounts/login/")).status_code == 200
                latencies.append(time.monotonic() - start)

    prober = asyncio.create_task(probe())
    replies = 0
    async with opener(server, f"/ws/requests/{carol['done']}/", carol["session"]) as ws:
        await first_message(ws)
        await first_message(ws)  # terminal
        try:
            for _ in range(20_000):
                await ws.send('{"type":"ping"}')
        except ConnectionClosed:
            pass
        try:
            while True:
                if json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "pong":
                    replies += 1
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 4429
    stop_probe.set()
    await prober
    assert replies <= 25, "pings past the budget are dropped unanswered"
    assert latencies and statistics.median(latencies) < 0.5, latencies


async def test_snapshot_requests_past_the_budget_are_not_answered(server: dict[str, Any]) -> None:
    carol = server["users"]["carol"]
    snapshots = 0
    async with opener(server, f"/ws/requests/{carol['done']}/", carol["session"]) as ws:
        try:
            for _ in range(3000):
                await ws.send('{"type":"snapshot"}')
        except ConnectionClosed:
            pass
        try:
            while True:
                if json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "snapshot":
                    snapshots += 1
        except ConnectionClosed:
            pass
    assert snapshots <= 30  # the first, then at most one per frame within the budget (not 3,000)


def cancels(server: dict[str, Any], request_id: str) -> int:
    with sqlite3.connect(server["db"], timeout=20) as db:
        rows = db.execute("SELECT cancels, cancel_requested, status FROM responses_app_responserequest WHERE id = ?",
                          (request_id.replace("-", ""),)).fetchall()
    return int(rows[0][0])


async def test_repeated_cancels_from_many_sockets_are_written_once(server: dict[str, Any],
                                                                   sockets: list[ClientConnection]) -> None:
    dave = server["users"]["dave"]
    path = f"/ws/requests/{dave['live']}/"
    for _ in range(3):
        sockets.append(await opener(server, path, dave["session"]))
        await first_message(sockets[-1])
    for ws in sockets:
        for _ in range(10):
            await ws.send('{"type":"cancel"}')
    for ws in sockets:  # wait for the outcome, then check the count
        while (message := json.loads(await asyncio.wait_for(ws.recv(), 20)))["type"] != "terminal":
            pass
        assert message["status"] == "cancelled", message
    assert cancels(server, dave["live"]) == 1


async def login(client: httpx.AsyncClient, username: str) -> tuple[str, str]:
    """Through the real login form: the new session's key and the CSRF token."""
    token = (await client.get("/accounts/login/")).cookies["csrftoken"]
    done = await client.post("/accounts/login/", data={"username": username, "password": "pw"},
                             headers={"X-CSRFToken": token})
    assert done.status_code == 302, done.text
    return client.cookies["sessionid"], client.cookies["csrftoken"]


async def test_logout_closes_the_sessions_sockets_4401_within_a_second(server: dict[str, Any]) -> None:
    erin = server["users"]["erin"]
    async with httpx.AsyncClient(base_url=server["url"]) as client:
        session, token = await login(client, "erin")
        async with opener(server, f"/ws/requests/{erin['done']}/", session) as ws:
            await first_message(ws)
            out = await client.post("/accounts/logout/", headers={"X-CSRFToken": token})
            assert out.status_code == 302
            logged_out = time.monotonic()
            assert await close_code(ws, timeout=5) == 4401
            assert time.monotonic() - logged_out < 1.0
    async with opener(server, f"/ws/requests/{erin['done']}/", erin["session"]) as other:
        assert (await first_message(other))["type"] == "snapshot", "the user's other sessions stay"


async def test_an_expired_session_closes_its_sockets_4401(server: dict[str, Any]) -> None:
    script = ("from django.contrib.auth import get_user_model; from django.contrib.sessions.backends.db import "
              "SessionStore; u = get_user_model().objects.get(username='alice'); s = SessionStore(); "
              "s['_auth_user_id'] = str(u.pk); s['_auth_user_backend'] = 'django.contrib.auth.backends.ModelBackend';"
              "s['_auth_user_hash'] = u.get_session_auth_hash(); s.set_expiry(3); s.create(); "
              "print('KEY', s.session_key)")
    shell = await asyncio.to_thread(subprocess.run, [sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT,
                                    env=server["env"], check=True, capture_output=True, text=True, timeout=60)
    created = time.monotonic()
    session = next(line.split()[1] for line in shell.stdout.splitlines() if line.startswith("KEY "))
    alice = server["users"]["alice"]
    async with opener(server, f"/ws/requests/{alice['done']}/", session) as ws:
        assert (await first_message(ws))["type"] == "snapshot"
        assert await close_code(ws, timeout=10) == 4401
        assert time.monotonic() - created < 3 + 1.0, "closed within a second of the expiry"


def test_no_tracebacks_in_the_server_log(server: dict[str, Any]) -> None:
    log = Path(server["log"]).read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]


async def test_one_pending_snapshot_per_socket() -> None:
    consumer = RequestConsumer()
    loop = asyncio.get_running_loop()
    consumer.cursor = Cursor(clock=loop.time, later=loop.call_later)
    for _ in range(50):
        await consumer.receive(text_data='{"type":"snapshot"}')
    outbox = consumer.cursor.outbox
    assert [outbox.get_nowait() for _ in range(outbox.qsize())] == [RESYNC]


def test_frame_budget_refills_with_time() -> None:
    budget = FrameBudget(rate=10, burst=5, now=0.0)
    assert [budget.allow(0.0) for _ in range(6)] == [True] * 5 + [False]
    assert not budget.exhausted
    assert [budget.allow(0.0) for _ in range(5)] == [False] * 5 and budget.exhausted
    assert budget.allow(0.1) and not budget.exhausted, "a tenth of a second later: one more frame"

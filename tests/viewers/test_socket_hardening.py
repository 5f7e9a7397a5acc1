"""Both sockets hardened alike (viewers/guard.py, routing.py): the one suite.

Against the real server (project.serve) through a real client (`websockets`): exact origins; 4404
for unknown paths; logout, session expiry and a password change close every socket of the session
with 4401 within a second; the per-user socket cap counts both kinds and never leaks a slot; the
frame budget cuts a flood off on both while the server stays responsive; the bad-frame rule (binary
1003, invalid UTF-8 or JSON 1007, too long 1009, an unknown type answered and kept open) holds on
both; cancelling needs the change permission and is written once however many sockets press it;
no traceback anywhere. Without a socket: the session rule (a session is its user's while Django's
own rule holds against the user as stored now), which saves of a user tell that user's sockets to
look again, the frame budget, one pending snapshot per socket."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from responses_app.limits import FrameBudget
from responses_app.viewers.cursor import RESYNC, Cursor
from responses_app.viewers.guard import session_expiry_left, session_time_left, user_group
from responses_app.viewers.request import RequestConsumer
from tests.servers import served

ROOT = Path(__file__).resolve().parent.parent.parent
CAP = 4  # RELAY_MAX_SOCKETS_PER_USER
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
ROLES = {  # name: (staff, superuser, permissions)
    "owner": (False, False, ()),
    "hana": (False, False, ()), "pat": (False, False, ()), "cap": (False, False, ()), "flo": (False, False, ()),
    "bad": (False, False, ()), "alice": (False, False, ()), "bob": (False, False, ()), "carol": (False, False, ()),
    "dave": (False, False, ()), "erin": (False, False, ()),
    "nobody": (True, False, ()),
    "viewer": (True, False, ("view_responserequest",)),
    "changer": (True, False, ("view_responserequest", "change_responserequest")),
    "root": (True, True, ()),
}
SETUP = """
import json
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.sessions.backends.db import SessionStore
from responses_app import services
from responses_app.models import ResponseRequest
out = {}
for name, (staff, superuser, codenames) in %(roles)r.items():
    user = get_user_model().objects.create_user(name, password="pw", is_staff=staff, is_superuser=superuser)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    s = SessionStore()
    s["_auth_user_id"] = str(user.pk)
    s["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    s["_auth_user_hash"] = user.get_session_auth_hash()
    s.create()
    conversation = services.conversation_create(owner=user)
    done, _ = services.request_create(owner=user, input="x", model="sim-text", client_request_id="done",
                                      conversation=conversation)
    ResponseRequest.objects.filter(pk=done.pk).update(status="completed")
    live, _ = services.request_create(owner=user, input="x", model="sim-long", client_request_id="live",
        conversation=conversation, params={"background": True, "metadata": {"sim.tokens_per_s": "3"}})
    out[name] = {"session": s.session_key, "conversation": str(conversation.pk), "done": str(done.pk),
                 "live": str(live.pk)}
print("SETUP " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with served(tmp_path_factory.mktemp("sockets-hardened"), SETUP % {"roles": ROLES},
                RELAY_MAX_SOCKETS_PER_USER=str(CAP), RELAY_WS_FRAME_RATE="10", RELAY_WS_FRAME_BURST="20") as running:
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


async def login(client: httpx.AsyncClient, username: str) -> tuple[str, str]:
    """Through the real login form: the new session's key and the CSRF token."""
    token = (await client.get("/accounts/login/")).cookies["csrftoken"]
    done = await client.post("/accounts/login/", data={"username": username, "password": "pw"},
                             headers={"X-CSRFToken": token})
    assert done.status_code == 302, done.text
    return client.cookies["sessionid"], client.cookies["csrftoken"]


@pytest.fixture
async def sockets() -> AsyncIterator[list[ClientConnection]]:
    opened: list[ClientConnection] = []
    yield opened
    for ws in opened:
        await ws.close()


def paths(user: dict[str, str]) -> dict[str, str]:
    return {"request": f"/ws/requests/{user['done']}/", "conversation": f"/ws/conversations/{user['conversation']}/"}


async def open_both(server: dict[str, Any], session: str, user: dict[str, str]) -> list[ClientConnection]:
    """A request socket and a conversation socket with `session`, each past its first message."""
    sockets = []
    for path in paths(user).values():
        ws = await opener(server, path, session)
        await first_message(ws)
        sockets.append(ws)
    return sockets


async def all_closed_4401_within_a_second(sockets: list[ClientConnection], since: float) -> None:
    codes = await asyncio.gather(*(close_code(ws, timeout=5) for ws in sockets))
    assert codes == [4401] * len(sockets)
    assert time.monotonic() - since < 1.0


async def reply(ws: ClientConnection, frame: str | bytes) -> dict[str, Any]:
    await ws.send(frame)
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if isinstance(message, dict) and message.get("type") in ("pong", "error"):
            return message  # type: ignore[no-any-return]


# --- who may connect ----------------------------------------------------------------------------

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


# --- the session ---------------------------------------------------------------------------------

async def test_logout_closes_both_sockets_of_the_session(server: dict[str, Any]) -> None:
    hana = server["users"]["hana"]
    async with httpx.AsyncClient(base_url=server["url"]) as client:
        session, token = await login(client, "hana")
        sockets = await open_both(server, session, hana)
        assert (await client.post("/accounts/logout/", headers={"X-CSRFToken": token})).status_code == 302
        await all_closed_4401_within_a_second(sockets, time.monotonic())
    others = await open_both(server, hana["session"], hana)  # the user's other sessions stay
    for ws in others:
        await ws.close()


async def test_a_password_change_closes_the_other_sessions_sockets(server: dict[str, Any]) -> None:
    """The session hash is compared with the user's current stored password, read when the user
    is saved: sockets of another session of the user close at once, not at the next check."""
    pat = server["users"]["pat"]
    async with httpx.AsyncClient(base_url=server["url"]) as here, httpx.AsyncClient(base_url=server["url"]) as there:
        session, token = await login(here, "pat")
        other, _ = await login(there, "pat")
        theirs = await open_both(server, other, pat)
        mine = await open_both(server, session, pat)
        changed = await here.post("/accounts/password_change/", headers={"X-CSRFToken": token}, data={
            "old_password": "pw", "new_password1": "a new Passw0rd!", "new_password2": "a new Passw0rd!"})
        assert changed.status_code == 302, changed.text[:500]
        since = time.monotonic()
        await all_closed_4401_within_a_second(theirs, since)
        # This tab's session key was cycled by the change (update_session_auth_hash): its sockets
        # close too, and reconnect with the new cookie.
        await all_closed_4401_within_a_second(mine, since)
        assert here.cookies["sessionid"] != session
        again = await open_both(server, here.cookies["sessionid"], pat)
        for ws in again:
            await ws.close()
    async with opener(server, paths(pat)["conversation"], other) as stale:
        assert await close_code(stale) == 4403, "the other session is no one's now"


async def test_an_expired_session_closes_both_sockets(server: dict[str, Any]) -> None:
    script = ("from django.contrib.auth import get_user_model; from django.contrib.sessions.backends.db import "
              "SessionStore; u = get_user_model().objects.get(username='hana'); s = SessionStore(); "
              "s['_auth_user_id'] = str(u.pk); s['_auth_user_backend'] = 'django.contrib.auth.backends.ModelBackend';"
              "s['_auth_user_hash'] = u.get_session_auth_hash(); s.set_expiry(4); s.create(); "
              "print('KEY', s.session_key)")
    shell = await asyncio.to_thread(subprocess.run, [sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT,
                                    env=server["env"], check=True, capture_output=True, text=True, timeout=60)
    created = time.monotonic()
    session = next(line.split()[1] for line in shell.stdout.splitlines() if line.startswith("KEY "))
    sockets = await open_both(server, session, server["users"]["hana"])
    codes = await asyncio.gather(*(close_code(ws, timeout=10) for ws in sockets))
    assert codes == [4401, 4401]
    assert time.monotonic() - created < 4 + 1.0, "closed within a second of the expiry"


# --- sockets per user, frames --------------------------------------------------------------------

async def test_sockets_per_user_are_limited_and_never_leak(server: dict[str, Any],
                                                           sockets: list[ClientConnection]) -> None:
    bob = server["users"]["bob"]
    path = f"/ws/requests/{bob['done']}/"
    for _ in range(CAP):
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


async def test_the_socket_cap_counts_both_kinds(server: dict[str, Any]) -> None:
    cap = server["users"]["cap"]
    held = await open_both(server, cap["session"], cap) + await open_both(server, cap["session"], cap)
    for path in paths(cap).values():
        async with opener(server, path, cap["session"]) as extra:
            assert await close_code(extra) == 4429, path
    for ws in held:
        await ws.close()


@pytest.mark.parametrize(("kind", "name"), [("request", "carol"), ("conversation", "flo")])
async def test_a_flood_of_frames_is_cut_off_and_the_server_stays_responsive(server: dict[str, Any], kind: str,
                                                                             name: str) -> None:
    user = server["users"][name]
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
    async with opener(server, paths(user)[kind], user["session"]) as ws:
        await first_message(ws)
        if kind == "request":
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


BAD_FRAMES: list[tuple[str, Any, int]] = [
    ("binary", b'{"type":"ping"}', 1003),
    ("not JSON", "{type: ping", 1007),
    ("JSON but not an object", '["ping"]', 1007),
    ("not UTF-8", b"\xff\xfe{}", 1007),
    ("too long", '{"type":"ping","pad":"' + "x" * 5000 + '"}', 1009),
]


@pytest.mark.parametrize("kind", ["request", "conversation"])
@pytest.mark.parametrize(("frame", "data", "code"), BAD_FRAMES, ids=[f[0] for f in BAD_FRAMES])
async def test_bad_frames_close_with_a_code_on_both_sockets(server: dict[str, Any], kind: str, frame: str,
                                                            data: Any, code: int) -> None:
    bad = server["users"]["bad"]
    async with opener(server, paths(bad)[kind], bad["session"]) as ws:
        await first_message(ws)
        await ws.send(data, text=True) if frame == "not UTF-8" else await ws.send(data)
        assert await close_code(ws) == code


@pytest.mark.parametrize("kind", ["request", "conversation"])
async def test_an_unknown_message_is_answered_and_the_socket_stays_open(server: dict[str, Any], kind: str) -> None:
    bad = server["users"]["bad"]
    async with opener(server, paths(bad)[kind], bad["session"]) as ws:
        await first_message(ws)
        assert await reply(ws, '{"type":"frobnicate"}') == {"type": "error", "message": "unknown message"}
        assert await reply(ws, '{"type":"ping"}') == {"type": "pong"}


# --- stopping ------------------------------------------------------------------------------------

def status(server: dict[str, Any], request_id: str) -> str:
    with sqlite3.connect(server["db"], timeout=20) as db:
        row = db.execute("SELECT status FROM responses_app_responserequest WHERE id = ?",
                         (request_id.replace("-", ""),)).fetchone()
    return str(row[0])


async def test_who_may_watch_and_who_may_stop_over_the_sockets(server: dict[str, Any]) -> None:
    users, owner = server["users"], server["users"]["owner"]
    live = f"/ws/requests/{owner['live']}/"
    for path in (live, paths(owner)["conversation"]):
        async with opener(server, path, users["nobody"]["session"]) as ws:
            assert await close_code(ws) == 4403, "staff without permissions: not even to read"
    async with opener(server, live, users["viewer"]["session"]) as ws:
        assert (await first_message(ws))["type"] == "snapshot"
        refused = await reply(ws, '{"type":"cancel"}')
        assert refused["type"] == "error" and "change_responserequest" in refused["message"]
        assert status(server, owner["live"]) in ("pending", "streaming")
    async with opener(server, paths(owner)["conversation"], users["viewer"]["session"]) as ws:
        assert (await first_message(ws))["type"] == "turns"
    async with opener(server, live, users["changer"]["session"]) as ws:
        await first_message(ws)
        await ws.send('{"type":"cancel"}')
        while (message := json.loads(await asyncio.wait_for(ws.recv(), 20))).get("type") != "terminal":
            pass
        assert message["status"] == "cancelled"
    hana = users["hana"]["live"]
    async with opener(server, f"/ws/requests/{hana}/", users["root"]["session"]) as ws:
        await first_message(ws)
        await ws.send('{"type":"cancel"}')
        while (message := json.loads(await asyncio.wait_for(ws.recv(), 20))).get("type") != "terminal":
            pass
        assert message["status"] == "cancelled", "a superuser may do everything"


def cancels(server: dict[str, Any], request_id: str) -> int:
    with sqlite3.connect(server["db"], timeout=20) as db:
        rows = db.execute("SELECT cancels FROM responses_app_responserequest WHERE id = ?",
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


def test_no_tracebacks_in_the_server_log(server: dict[str, Any]) -> None:
    """After the server's other tests: none of them left a traceback (a 4404, a bad frame, a flood)."""
    log = Path(server["log"]).read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]


# --- without a socket ----------------------------------------------------------------------------

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


# --- the session rule, without a socket --------------------------------------------------------

def session_of(user: Any, *, auth_hash: str | None = None, backend: str = MODEL_BACKEND) -> str:
    store = SessionStore()
    store["_auth_user_id"] = str(user.pk)
    store["_auth_user_backend"] = backend
    store["_auth_user_hash"] = user.get_session_auth_hash() if auth_hash is None else auth_hash
    store.create()
    return str(store.session_key)


@pytest.mark.django_db
def test_a_live_session_has_its_expiry_left(owner: Any) -> None:
    left = session_time_left(session_of(owner), owner.pk)
    assert left is not None and 0 < left <= 14 * 24 * 3600


@pytest.mark.django_db
def test_the_first_check_after_connect_reads_the_expiry_alone(owner: Any) -> None:
    """The auth middleware checked the session's user and hash a moment before: in a burst of
    reconnects (a web process restarting), each socket's first check is one query, not three."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    key = session_of(owner)
    with CaptureQueriesContext(connection) as first:
        left = session_expiry_left(key)
    with CaptureQueriesContext(connection) as full:
        assert session_time_left(key, owner.pk) == pytest.approx(left, abs=5)
    assert left is not None and 0 < left <= 14 * 24 * 3600
    assert (len(first), len(full)) == (1, 3), [q["sql"] for q in full]
    SessionStore(session_key=key).delete()
    assert session_expiry_left(key) is None, "a session gone since: closed at once"


@pytest.mark.django_db
def test_a_password_changed_since_is_read_from_the_database(owner: Any) -> None:
    key = session_of(owner)
    stale = get_user_model().objects.get(pk=owner.pk)  # what a socket loaded at connect
    changed = get_user_model().objects.get(pk=owner.pk)
    changed.set_password("another secret")
    changed.save()
    assert stale.get_session_auth_hash() != changed.get_session_auth_hash()
    assert session_time_left(key, owner.pk) is None


@pytest.mark.django_db
def test_a_password_written_by_an_update_is_noticed_too(owner: Any) -> None:
    key = session_of(owner)
    get_user_model().objects.filter(pk=owner.pk).update(password="pbkdf2_sha256$1$x$y")
    assert session_time_left(key, owner.pk) is None


@pytest.mark.django_db
@pytest.mark.parametrize("change", ["deactivated", "deleted", "flushed", "another user", "unknown backend",
                                    "no hash"])
def test_sessions_that_are_no_longer_the_users(owner: Any, teammate: Any, change: str) -> None:
    key = session_of(owner, backend="x.Backend" if change == "unknown backend" else MODEL_BACKEND,
                     auth_hash="" if change == "no hash" else None)
    if change == "deactivated":
        get_user_model().objects.filter(pk=owner.pk).update(is_active=False)
    elif change == "deleted":
        user_id = owner.pk
        owner.delete()
        owner.pk = user_id
    elif change == "flushed":
        SessionStore(session_key=key).delete()
    user_id = teammate.pk if change == "another user" else owner.pk
    assert session_time_left(key, user_id) is None


@pytest.mark.django_db
def test_a_hash_made_with_a_fallback_secret_still_holds(owner: Any, settings: Any) -> None:
    old_hash = owner.get_session_auth_hash()
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-secret-key-" + "x" * 40
    key = session_of(owner, auth_hash=old_hash)
    assert session_time_left(key, owner.pk) is not None
    settings.SECRET_KEY_FALLBACKS = []
    assert session_time_left(key, owner.pk) is None


@pytest.fixture
def listening(owner: Any) -> Any:
    """A channel in the owner's user group, as each of their sockets is."""
    layer = get_channel_layer()
    assert layer is not None
    owner.listener = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(owner.pk), owner.listener)
    return owner


def pending(owner: Any) -> int:
    layer = get_channel_layer()
    queue = layer.channels.get(owner.listener)  # type: ignore[union-attr]
    return 0 if queue is None else int(queue.qsize())


@pytest.mark.django_db
def test_a_password_set_tells_the_users_sockets_once_committed(listening: Any, commits: Any) -> None:
    with commits(execute=True) as callbacks:
        listening.set_password("new")
        listening.save()
        assert pending(listening) == 0, "not before the commit: a socket would read the old hash"
    assert len(callbacks) == 1 and pending(listening) == 1


@pytest.mark.django_db
@pytest.mark.parametrize("fields", [["password"], ["is_active"], None])
def test_saves_that_may_end_a_session_tell_the_sockets(listening: Any, commits: Any,
                                                       fields: list[str] | None) -> None:
    with commits(execute=True):
        listening.save(update_fields=fields)
    assert pending(listening) == 1


@pytest.mark.django_db
def test_a_login_or_another_field_tells_nothing(listening: Any, commits: Any) -> None:
    with commits(execute=True) as callbacks:
        listening.save(update_fields=["last_login"])
        listening.save(update_fields=["first_name"])
        get_user_model().objects.create_user("newcomer")
    assert callbacks == [] and pending(listening) == 0


@pytest.fixture
def commits(django_capture_on_commit_callbacks: Any) -> Any:
    return django_capture_on_commit_callbacks

"""Both sockets hardened alike, against the real server (project.serve) through a real client
(`websockets`): logout, session expiry and a password change close every socket of the session
with 4401 within a second; the per-user socket cap counts both kinds; the frame budget and the
bad-frame rule (binary 1003, invalid UTF-8 or JSON 1007, too long 1009, an unknown type answered
and kept open) hold on both; cancelling needs the change permission; no traceback anywhere."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from tests.test_security_websocket import close_code, first_message, login, opener, served

ROOT = Path(__file__).resolve().parent.parent
ROLES = {  # name: (staff, superuser, permissions)
    "owner": (False, False, ()),
    "hana": (False, False, ()), "pat": (False, False, ()), "cap": (False, False, ()), "flo": (False, False, ()),
    "bad": (False, False, ()),
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
                RELAY_MAX_SOCKETS_PER_USER="4", RELAY_WS_FRAME_RATE="10", RELAY_WS_FRAME_BURST="20") as running:
        yield running


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


async def test_the_socket_cap_counts_both_kinds(server: dict[str, Any]) -> None:
    cap = server["users"]["cap"]
    held = await open_both(server, cap["session"], cap) + await open_both(server, cap["session"], cap)
    for path in paths(cap).values():
        async with opener(server, path, cap["session"]) as extra:
            assert await close_code(extra) == 4429, path
    for ws in held:
        await ws.close()


async def test_a_flood_on_the_conversation_socket_is_cut_off(server: dict[str, Any]) -> None:
    flo = server["users"]["flo"]
    replies = 0
    async with opener(server, paths(flo)["conversation"], flo["session"]) as ws:
        await first_message(ws)
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
    assert replies <= 25, "pings past the budget are dropped unanswered"


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


def test_no_tracebacks_in_the_server_log(server: dict[str, Any]) -> None:
    log = Path(server["log"]).read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]

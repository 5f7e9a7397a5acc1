"""Bad input through the real server under production settings (project.serve, DJANGO_ENV=production,
the standalone simulator as its provider): a clear 4xx, never a 500; the server's own websocket
frame limit; and a 500 that does happen leaves its traceback in the server's log."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from tests.host.test_security_production import HOST, manage, production_env, serve
from tests.servers import migrate, stop

TOKEN = "alice-" + secrets.token_hex(24)

SETUP = """
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from responses_app import services
from responses_app.models import ResponseRequest
user = get_user_model().objects.create_user("alice", password="pw")
conversation = services.conversation_create(owner=user)
request, _ = services.request_create(owner=user, input="Hi", model="sim-text", client_request_id="k",
                                     conversation=conversation, params={})
ResponseRequest.objects.filter(pk=request.pk).update(status="completed")
session = SessionStore()
session["_auth_user_id"] = str(user.pk)
session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
session["_auth_user_hash"] = user.get_session_auth_hash()
session.create()
print(conversation.pk, request.pk, session.session_key)
"""


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory, simulator_url: str) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("production-input")
    env = {k: v for k, v in production_env(tmp, simulator_url, RELAY_API_TOKENS=f"alice={TOKEN}").items() if v != ""}
    migrate(env)
    manage(env, "collectstatic", "--noinput")
    conversation, request, session = manage(env, "shell", "-c", SETUP).stdout.split()[-3:]
    proc, url = serve(env, tmp / "server.log", headers={"Host": HOST, "X-Forwarded-Proto": "https"})
    try:
        yield {"url": url, "env": env, "log": tmp / "server.log", "conversation": conversation,
               "request": request, "session": session}
    finally:
        stop(proc)  # type: ignore[arg-type]


def https(**headers: str) -> dict[str, str]:
    return {"Host": HOST, "X-Forwarded-Proto": "https", **headers}


def signed_in(prod: dict[str, Any]) -> dict[str, str]:
    """The session and CSRF cookies, as a browser on https://relay.test sends them with a form."""
    csrf = secrets.token_hex(16)
    return https(Cookie=f"sessionid={prod['session']}; csrftoken={csrf}", **{"X-CSRFToken": csrf},
                 Origin=f"https://{HOST}", Referer=f"https://{HOST}/")


def bearer() -> dict[str, str]:
    return https(Authorization=f"Bearer {TOKEN}")


def test_a_share_of_a_turn_that_is_not_an_id_is_a_400(prod: dict[str, Any]) -> None:
    for turn in ("x", "1" * 40, "\u00e9", "00000000-0000-0000-0000-000000000000"):
        response = httpx.post(f"{prod['url']}/c/{prod['conversation']}/shares", data={"turn": turn},
                              headers=signed_in(prod), timeout=10)
        assert response.status_code == 400, (turn, response.status_code, response.text[:300])
        assert response.text == "No such turn in this conversation."
    made = httpx.post(f"{prod['url']}/c/{prod['conversation']}/shares", data={"turn": prod["request"]},
                      headers={**signed_in(prod), "Accept": "application/json"}, timeout=10)
    assert made.status_code == 201, made.text[:300]


def test_an_aisdk_approval_answer_for_a_message_that_is_not_a_request_is_a_404(prod: dict[str, Any]) -> None:
    for message_id in ("msg-1", "x" * 5000, "\u0000"):
        body = {"id": "chat-1", "messages": [{"id": message_id, "role": "assistant", "parts": [
            {"type": "tool-x", "state": "approval-responded", "approval": {"id": "mcpr_1", "approved": True}}]}]}
        response = httpx.post(f"{prod['url']}/api/aisdk/chat", json=body, headers=bearer(), timeout=10)
        assert response.status_code == 404, (message_id[:20], response.status_code, response.text[:300])
        assert response.json() == {"error": "no such request"}


def test_an_agui_cursor_with_a_huge_number_is_a_400(prod: dict[str, Any]) -> None:
    url = f"{prod['url']}/api/agui/requests/{prod['request']}/stream"
    for cursor in ("1." + "9" * 5000, "9" * 5000 + ".1", "1.1.0t" + "9" * 5000, "1.\u0661"):
        sent = [(k.encode(), v.encode()) for k, v in bearer().items()] + [(b"Last-Event-ID", cursor.encode())]
        response = httpx.get(url, headers=sent, timeout=10)
        assert response.status_code == 400, (cursor[:20], response.status_code, response.text[:300])
        assert response.json()["error"].startswith(("not a cursor", "a cursor"))
        response = httpx.get(url, params={"last_event_id": cursor}, headers=bearer(), timeout=10)
        assert response.status_code == 400


def test_the_servers_websocket_frame_limit_is_the_apps(prod: dict[str, Any]) -> None:
    """A 1 MB frame is refused by the server itself (1009), never read whole into the app."""
    address = prod["url"].removeprefix("http://")
    headers = {"X-Forwarded-Proto": "https", "Origin": f"https://{address}", "Cookie": f"sessionid={prod['session']}"}

    async def send_big() -> tuple[int, str]:
        async with websockets.connect(f"ws://{address}/ws/requests/{prod['request']}/", max_size=None,
                                      open_timeout=10, additional_headers=headers) as ws:
            try:
                await ws.send("x" * 1_000_000)
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
            except websockets.ConnectionClosed:
                pass
            assert ws.protocol.close_rcvd is not None, "the server closed with a close frame"
            return ws.protocol.close_rcvd.code, ws.protocol.close_rcvd.reason

    code, reason = asyncio.run(send_big())
    assert code == 1009 and "exceeds limit" in reason, (code, reason)  # the server's own close, not the app's
    assert "Traceback" not in Path(prod["log"]).read_text(errors="replace")


def test_a_5xx_leaves_its_traceback_in_the_servers_log(tmp_path: Path, simulator_url: str) -> None:
    """A database with no tables: the signed-in page's session lookup raises, Django answers 500,
    and the traceback is in the server's stderr."""
    env = {k: v for k, v in production_env(tmp_path, simulator_url).items() if v != ""}
    manage(env, "collectstatic", "--noinput")
    log = tmp_path / "server.log"
    proc, url = serve(env, log, headers=https())
    try:
        response = httpx.get(f"{url}/", headers=https(Cookie="sessionid=" + "a" * 32), timeout=10)
        assert response.status_code == 500
    finally:
        stop(proc)  # type: ignore[arg-type]
    text = log.read_text(errors="replace")
    assert "Traceback (most recent call last)" in text and "no such table: django_session" in text, text[-3000:]
    assert "ERROR django.request" in text



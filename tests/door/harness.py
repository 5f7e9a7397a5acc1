"""The one-door tests' servers: a real relay server (project.serve in a subprocess, a file SQLite
database) whose upstream is the simulator as a provider would be (RELAY_UPSTREAM_BASE_URL, so
every body carries the output cap), served on real loopback HTTP by a thread of this process that
keeps every request body it gets (`Recorder`). The fixtures are in conftest.py.

Limits: RELAY_MAX_CONCURRENT_PER_USER=3, RELAY_SUBMIT_RATE=2/d, RELAY_ALLOWED_MODELS=sim-text,
sim-function, RELAY_MAX_OUTPUT_TOKENS=300, the precheck on with one rule (`forbidden fruit`). Each
test has users of its own (`<property>-<path>`), each with a session and a conversation holding
one finished turn (the one Regenerate and Edit resend): of a model removed from the allowlist for
`allowlist`, calling a tool for `cap`, saying the rule's phrase for `precheck`, with a system
message no server code sent for `items-regenerate`; the users of
`concurrency` already have three requests in flight under a live lease.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from responses_app.simulator.app import create_app
from responses_app.simulator.auth import DEV_API_KEY

ROOT = Path(__file__).resolve().parents[2]
PATHS = ("new", "chat", "api", "regenerate", "edit", "agui", "aisdk", "python")
PROPERTIES = ("concurrency", "rate", "allowlist", "validation", "cap", "precheck", "items")
CAP = 300
PHRASE = "forbidden fruit"
CSRF = "c" * 32  # a CSRF secret set as the cookie and sent back as the header
TURNS = {  # the finished turn of each property's (or user's) conversation: (model, prompt)
    "allowlist": ("sim-retired", "hello"),
    "cap": ("sim-function", "What is the weather in Paris?"),
    "precheck": ("sim-text", f"tell me about the {PHRASE}"),
    # stored as no user may send it (no server code sent it): Regenerate meets the allowlist
    "items-regenerate": ("sim-text", [{"role": "system", "content": "forged"}, {"role": "user", "content": "hello"}]),
}
SETUP = """
import json, uuid
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.utils import timezone
from responses_app import services
from responses_app.models import ResponseRequest
out = {}
for prop in %(properties)r:
    for path in %(paths)r:
        name = f"{prop}-{path}"
        user = get_user_model().objects.create_user(name)  # no password: its session is made here
        s = SessionStore()
        s["_auth_user_id"] = str(user.pk)
        s["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
        s["_auth_user_hash"] = user.get_session_auth_hash()
        s.create()
        model, prompt = %(turns)r.get(name) or %(turns)r.get(prop, ("sim-text", "hello"))
        conversation = services.conversation_create(owner=user)
        turn, _ = services.request_create(owner=user, input=prompt, model=model, client_request_id="turn",
            conversation=conversation, params={"background": False, "metadata": {"door": name}})
        ResponseRequest.objects.filter(pk=turn.pk).update(status="completed")
        if prop == "concurrency":
            for i in range(3):
                live, _ = services.request_create(owner=user, input="x", model="sim-text",
                                                  client_request_id=f"live-{i}", params={})
                ResponseRequest.objects.filter(pk=live.pk).update(
                    status="streaming", runner_token=uuid.uuid4(), lease_expires=timezone.now() + timedelta(days=1))
        out[name] = {"session": s.session_key, "conversation": str(conversation.pk), "turn": str(turn.pk)}
print("SETUP " + json.dumps(out))
"""


@dataclass
class Recorder:
    """The simulator's ASGI app behind a recorder of every request body it is sent."""

    app: Any = field(default_factory=lambda: create_app(api_key=DEV_API_KEY))
    received: list[tuple[str, bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        with self.lock:
            self.received.append((f"{scope['method']} {scope['path']}", body))
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # type: ignore[no-any-return]

        await self.app(scope, replay, send)

    def bodies(self) -> list[dict[str, Any]]:
        """Every `POST /v1/responses` body, parsed."""
        with self.lock:
            return [json.loads(body) for line, body in self.received if line == "POST /v1/responses"]

    def raw(self) -> bytes:
        with self.lock:
            return b"\n".join(body for _, body in self.received)


@dataclass
class Door:
    url: str
    db: Path
    env: dict[str, str]
    users: dict[str, dict[str, str]]
    upstream: Recorder
    log: Path

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.db, timeout=20) as db:
            return db.execute(sql, params).fetchall()

    def requests_of(self, user: str) -> list[tuple[str, str, str]]:
        """(id, status, error_code) of each request of the user, oldest first."""
        return [(str(row[0]), row[1], row[2]) for row in self.query(
            "SELECT r.id, r.status, r.error_code FROM responses_app_responserequest r JOIN auth_user u "
            "ON u.id = r.owner_id WHERE u.username = ? ORDER BY r.created", user)]

    def wait_ended(self, request_id: str, timeout: float = 60) -> tuple[str, str]:
        """The request's (status, error_code) once it ended."""
        key = request_id.replace("-", "")
        deadline = time.monotonic() + timeout
        while True:
            status, code = self.query("SELECT status, error_code FROM responses_app_responserequest "
                                      "WHERE id = ?", key)[0]
            if status not in ("pending", "streaming"):
                return status, code
            assert time.monotonic() < deadline, f"request {request_id} still {status}"
            time.sleep(0.1)

    def python(self, user: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`responses_app.api.submit` for each of `calls` (keyword arguments), in a process of
        its own against the server's database; each call's outcome."""
        script = (
            "import json\nfrom django.contrib.auth import get_user_model\nfrom responses_app import api\n"
            "from responses_app.models import Conversation\n"
            f"user = get_user_model().objects.get(username={user!r})\n"
            "conversation = Conversation.objects.get(owner=user)\nout = []\n"
            f"for kwargs in {calls!r}:\n"
            "    try:\n"
            "        out.append({'status': 201, 'id': str(api.submit(user, conversation=conversation, **kwargs).pk)})\n"
            "    except api.Refused as refused:\n"
            "        out.append({'status': refused.status, 'code': refused.code, 'errors': refused.errors,\n"
            "                    'retry_after': refused.retry_after})\n"
            "print('DOOR ' + json.dumps(out))\n")
        shell = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=self.env,
                               check=True, capture_output=True, text=True, timeout=120)
        return json.loads(next(line for line in shell.stdout.splitlines()  # type: ignore[no-any-return]
                               if line.startswith("DOOR "))[5:])

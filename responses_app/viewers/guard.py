"""What both sockets (a request's and a conversation's) hold to alike: who may keep one open, how
many one user may have, how fast one may send, and what a bad frame gets. The origin check is in
routing.py; who may open which socket is each consumer's own (4403, 4404).

- **Session.** A socket lives only as long as the session it was opened with is still its user's:
  logged out, flushed, expired, its user deactivated or deleted, or a session hash that no longer
  matches the user's *current stored* password (a password change elsewhere) close it with 4401.
  Logout is pushed at once to the session's sockets (a group per session); a save of the user that
  may change its password or activity is pushed to every socket of the user, each of which
  re-reads its session then (a group per user). Both reach sockets in any process when the channel
  layer spans processes (Redis). Otherwise a socket notices at its session's expiry, or at the
  latest at the next check every SESSION_CHECK_SECONDS (a password written with
  `QuerySet.update` is only noticed so).
- **Sockets per user:** at most RELAY_MAX_SOCKETS_PER_USER across processes (limits.SocketSlots);
  more are closed 4429. A share link's anonymous viewers are counted by their address.
- **Share links** (`share` in the route: its token): the socket joins the link's group and closes
  4403 the moment the link is revoked (shares.share_revoke), in any process; the periodic session
  check asks the link again too (`still_visible`). An anonymous viewer has no session to watch.
- **Frames:** past the per-socket budget (RELAY_WS_FRAME_RATE, RELAY_WS_FRAME_BURST) a frame is
  dropped unread; a socket that keeps flooding is closed 4429.
- **Bad frames**, the same rule on both sockets, never a traceback: a binary frame is closed 1003
  (unsupported data: the protocol is JSON text); a text frame longer than MAX_FRAME_CHARS 1009
  (too big); text that is not a JSON object 1007 (invalid payload; a text frame that is not UTF-8
  is closed 1007 by the server before it reaches a consumer). A well-formed object of a type the
  socket does not know is answered `{"type": "error", "message": ...}` and the socket stays open:
  a newer client may send what this server does not know yet. `ping` is answered `pong` on both.
- **A stopping server** asks each socket's client to move (`move_sockets`: `{"type": "moving"}`)
  before it closes what is left with 1012: the client opens a new socket elsewhere first.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from importlib import import_module
from typing import Any

import orjson
from asgiref.sync import async_to_sync
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model, load_backend
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from .. import limits
from ..conf import app_settings
from ..relay.dbthreads import ws_call, ws_db
from ..relay.worker import layer_spans_processes
from ..shares import CLOSE_REVOKED, share_group
from ..wsthreads import PooledConsumerMixin

logger = logging.getLogger(__name__)

SESSION_CHECK_SECONDS = 60.0  # a session invalidated where no push reaches is noticed this soon
MAX_FRAME_CHARS = 4096  # every client message is a few dozen bytes
CLOSE_UNSUPPORTED = 1003
CLOSE_INVALID = 1007
CLOSE_TOO_BIG = 1009
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_MANY = 4429
CLOSE_TRY_AGAIN = 1013  # a service the socket needs is down (Redis, the database): reconnect with backoff
PONG = '{"type":"pong"}'
MOVING = '{"type":"moving"}'  # a stopping server asks the client to move: `move_sockets`


def session_group(session_key: str) -> str:
    return "relay-session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def user_group(user_id: Any) -> str:
    return "relay-user." + hashlib.sha256(str(user_id).encode()).hexdigest()[:40]


def _group_send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # the logout or save itself must succeed; its sockets then close at the next check
        logger.exception("could not tell the sockets of %s to check their session", group)


def close_sockets_on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """Every socket opened with this session closes 4401 now, in any process (through the layer)."""
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if session_key:
        _group_send(session_group(session_key), {"type": "relay.logout"})


def recheck_sockets_on_user_save(sender: Any, instance: Any, created: bool, update_fields: Any = None,
                                 **kwargs: Any) -> None:
    """A password set (`set_password`, a form, the admin) or a save that may deactivate the user:
    each socket of the user re-reads its session now. A login's `last_login` is not."""
    if created:
        return
    if update_fields is not None and not {"password", "is_active"} & set(update_fields):
        return
    group = user_group(instance.pk)  # once committed: a socket that looked before would read the old hash
    transaction.on_commit(lambda: _group_send(group, {"type": "relay.recheck"}))


def session_time_left(session_key: str, user_id: Any) -> float | None:
    """Seconds until the session expires; None once it is not this user's any more. Django's own
    rule (`auth.get_user`): the session's backend and user, the hash checked against the stored
    user's current password (or a SECRET_KEY_FALLBACKS hash), read fresh, without side effects."""
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    data = store.load()  # a fresh read: empty once the session is gone or expired
    backend_path = data.get(BACKEND_SESSION_KEY)
    if str(data.get(SESSION_KEY)) != str(user_id) or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    user = load_backend(backend_path).get_user(get_user_model()._meta.pk.to_python(user_id))
    if user is None:  # deleted, or a backend that refuses it now (an inactive user)
        return None
    if hasattr(user, "get_session_auth_hash"):
        session_hash = data.get(HASH_SESSION_KEY) or ""
        if not session_hash or not (constant_time_compare(session_hash, user.get_session_auth_hash()) or any(
                constant_time_compare(session_hash, h) for h in user.get_session_auth_fallback_hash())):
            return None
    return session_expiry_left(session_key, store)


def session_expiry_left(session_key: str, store: Any = None) -> float | None:
    """Seconds until the session expires as stored (None: gone), read alone: all a socket's first
    check needs, the auth middleware having checked the session's user and hash a moment before."""
    store = store or import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    if hasattr(store, "get_model_class"):  # database sessions: the stored expiry, not a new one
        expires = store.get_model_class().objects.filter(session_key=session_key).values_list(
            "expire_date", flat=True).first()
        if expires is None:
            return None
        return float((expires - timezone.now()).total_seconds())
    return float(store.get_expiry_age())


def service_down(exc: BaseException) -> bool:
    """Whether an error says a service is unreachable (Redis, the database), not that code is wrong."""
    return isinstance(exc, (ConnectionRefusedError, OperationalError, InterfaceError)) or \
        type(exc).__module__.startswith("redis")


def client_gone(exc: BaseException) -> bool:
    """Whether an error says the client went away mid-send (uvicorn's ClientDisconnected is an OSError)."""
    return isinstance(exc, OSError) and not isinstance(exc, ConnectionRefusedError)


_open: set[GuardedConsumer] = set()  # this process's accepted sockets, for `move_sockets`
_moving = False  # the process stops (`move_sockets`): a socket admitted from now on is asked at once


async def move_sockets(*, per_s: float, spread_s: float, wait_s: float) -> tuple[int, int]:
    """A stopping web process's first step, once it stopped listening: ask each open socket's client
    to move. A client that knows `moving` (livesocket.js) opens a new socket, which reaches another
    process, switches to it at its first message and closes this one (make before break), so its
    text goes on with no pause; meanwhile this socket serves it as before. The notices go `per_s`
    a second (at most `spread_s` for all: the other processes take the new sockets as they come);
    a socket whose handshake was under way when the process stopped listening is asked as it is
    admitted (`admit`). Then this waits up to `wait_s` after the last ask for the sockets to close.
    Returns (asked, still open): what is left (a tab loaded before `moving`, or one whose new
    socket failed) is the caller's to close, with 1012. With the in-memory layer no other process
    could serve a tab: nothing is asked."""
    global _moving
    if not layer_spans_processes():
        return 0, sum(not c.closing for c in _open)
    _moving = True
    sockets = [c for c in _open if not c.closing]
    loop = asyncio.get_running_loop()
    started = loop.time()
    rate = max(per_s, len(sockets) / spread_s)
    asks = []
    for i, consumer in enumerate(sockets):
        due = started + i / rate
        if (delay := due - loop.time()) > 0:
            await asyncio.sleep(delay)
        if consumer in _open and not consumer.closing:  # each its own task: a slow reader holds no other
            asks.append(loop.create_task(consumer.send(text_data=MOVING)))
    failed = sum(isinstance(r, BaseException) for r in await asyncio.gather(*asks, return_exceptions=True))
    deadline = loop.time() + wait_s
    while _open and loop.time() < deadline:  # those admitted meanwhile too
        await asyncio.sleep(0.02)
    late = len(_open.difference(sockets))
    left = sum(c in _open for c in sockets)
    logger.info("asked %d sockets to move (%d could not be asked): %d moved in %.2f s; %d admitted since, "
                "asked at once, still open", len(sockets), failed, len(sockets) - left, loop.time() - started,
                late)
    return len(sockets), left + late


class GuardedConsumer(PooledConsumerMixin, AsyncWebsocketConsumer):
    """A websocket consumer with the rules above. A subclass decides who may open it, then calls
    `admit` (which accepts the socket or closes it), handles its messages in `handle` and calls
    `super().disconnect(code)` from its own `disconnect`; `still_visible` says whether its viewer
    may still see what it opened (asked for share links)."""

    closing = False
    accepted = False
    share: str | None = None
    user_id: Any = None
    session_key: str | None = None
    slots: limits.SocketSlots | None = None
    budget: limits.FrameBudget | None = None
    watchdog: asyncio.Task[None] | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """A socket whose channel layer or database fails under it (Redis or PostgreSQL restarting)
        is closed 1013, try again later, with one warning line: not an HTTP 500 and a traceback
        per connect while the service is down. The page reconnects with its backoff. A client gone
        mid-send (it timed out its handshake, or moved) is let go quietly; either way what the
        socket joined and took is released."""
        try:
            await super().__call__(scope, receive, send)
        except Exception as exc:
            down, gone = service_down(exc), client_gone(exc)
            if not (down or gone):
                raise
            if down:
                logger.warning("a websocket of %s closed 1013: %s: %s", scope.get("path", "?"),
                               type(exc).__name__, str(exc)[:200])
            with contextlib.suppress(Exception):  # what it joined and took, as far as can be
                await self.disconnect(CLOSE_TRY_AGAIN if down else 1006)
            if down:
                with contextlib.suppress(Exception):
                    if not self.accepted:
                        await send({"type": "websocket.accept"})
                    await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN})
        finally:
            _open.discard(self)  # whatever ended it

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        await super().accept(subprotocol, headers)
        self.accepted = True

    async def refuse(self, code: int) -> None:
        """Accept, then close: a close before the handshake reaches browsers as a bare 1006, and
        the client must be able to tell "not yours" (stop retrying) from a network blip."""
        await self.accept()
        await self.shut(code)

    async def admit(self, user: Any) -> bool:
        """A socket slot and a live session, then accept; False when the socket was closed."""
        signed_in = bool(user.is_authenticated)
        slot_owner = user.pk if signed_in else f"anon:{(self.scope.get('client') or ['?'])[0]}"
        slots = limits.SocketSlots(user_id=slot_owner, owner=self.channel_name)
        if not await slots.acquire():
            await self.refuse(CLOSE_TOO_MANY)
            return False
        self.slots, self.user_id = slots, user.pk
        session = self.scope.get("session")
        self.session_key = session.session_key if session is not None and signed_in else None
        if session is not None and signed_in and not self.session_key:
            await self.refuse(CLOSE_UNAUTHENTICATED)
            await slots.release()
            return False
        self.budget = limits.FrameBudget(rate=app_settings.WS_FRAME_RATE, burst=app_settings.WS_FRAME_BURST,
                                         now=time.monotonic())
        await self.accept()
        _open.add(self)
        if _moving:  # its handshake began as the process stopped listening: it moves on at once
            await self.send(text_data=MOVING)
        if self.session_key:
            await self.channel_layer.group_add(session_group(self.session_key), self.channel_name)
            await self.channel_layer.group_add(user_group(user.pk), self.channel_name)
        if self.share:
            await self.channel_layer.group_add(share_group(self.share), self.channel_name)
            if not await ws_call(self.still_visible)():  # revoked in between: one or the other catches it
                await self.shut(CLOSE_REVOKED)
                return False
        self.watchdog = asyncio.get_running_loop().create_task(self._watch_session())
        return True

    def still_visible(self) -> bool:
        """Whether the viewer may still see what this socket opened (in a database thread)."""
        return True

    async def disconnect(self, code: int) -> None:
        _open.discard(self)
        if self.slots is None:
            return  # refused before a slot was taken
        try:
            watchdog, self.watchdog = self.watchdog, None  # its cancelled task's traceback holds this consumer
            if watchdog is not None:
                watchdog.cancel()
                if self.session_key:
                    await self.channel_layer.group_discard(session_group(self.session_key), self.channel_name)
                    await self.channel_layer.group_discard(user_group(self.user_id), self.channel_name)
            if self.share:
                await self.channel_layer.group_discard(share_group(self.share), self.channel_name)
        finally:
            await self.slots.release()  # whatever failed above, the slot is not leaked

    async def shut(self, code: int) -> None:
        """Close once with `code`; frames that arrive meanwhile are not read."""
        if not self.closing:
            self.closing = True
            await self.close(code=code)

    # --- frames from the client -------------------------------------------------------------------

    async def websocket_receive(self, message: dict[str, Any]) -> None:
        # The budget before anything else: a flood of frames dropped here costs microseconds each.
        budget = self.budget
        if budget is None or self.closing:
            return  # refused at connect, or already closing
        if not budget.allow(time.monotonic()):
            if budget.exhausted:  # a client that keeps flooding is cut off
                await self.shut(CLOSE_TOO_MANY)
            return
        text = message.get("text")
        await self.receive(text_data=text, bytes_data=None if text is not None else message.get("bytes") or b"")

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data is None:
            await self.shut(CLOSE_UNSUPPORTED)
            return
        if len(text_data) > MAX_FRAME_CHARS:
            await self.shut(CLOSE_TOO_BIG)
            return
        try:
            message = orjson.loads(text_data)
        except orjson.JSONDecodeError:
            message = None
        if not isinstance(message, dict):
            await self.shut(CLOSE_INVALID)
            return
        kind = message.get("type")
        if kind == "ping":
            await self.send(text_data=PONG)
        elif not await self.handle(kind, message):
            await self.send(text_data=orjson.dumps({"type": "error", "message": "unknown message"}).decode())

    async def handle(self, kind: Any, message: dict[str, Any]) -> bool:
        """A client message other than `ping`; False when this socket does not know it."""
        return False

    # --- the session ------------------------------------------------------------------------------

    async def relay_logout(self, event: dict[str, Any]) -> None:
        """This socket's session was logged out (in any process)."""
        await self.shut(CLOSE_UNAUTHENTICATED)

    async def relay_share_revoked(self, event: dict[str, Any]) -> None:
        """The share link this socket was opened through was revoked (in any process)."""
        await self.shut(CLOSE_REVOKED)

    async def relay_recheck(self, event: dict[str, Any]) -> None:
        """This socket's user was saved (a password change, say): is the session still theirs?"""
        if not self.closing and await self.session_seconds_left() is None:
            await self.shut(CLOSE_UNAUTHENTICATED)

    async def session_alive(self) -> bool:
        """For an action that must not outlive the session (a Stop): closes 4401 when it has ended."""
        if await self.session_seconds_left() is None:
            await self.shut(CLOSE_UNAUTHENTICATED)
            return False
        return True

    @ws_db
    def session_seconds_left(self, *, first: bool = False) -> float | None:
        """See `session_time_left`. A socket opened without a session (only in tests that bypass
        the auth middleware stack) has nothing to watch. `first`: the check right after connect,
        whose session, user and link were checked a moment before: one query for the expiry, not
        five (in a burst of reconnects, each connect's first view waited behind them)."""
        if self.share and not first and not self.still_visible():
            return None  # the link was revoked, its message lost on the way
        if "session" not in self.scope or (self.share and self.user_id is None):
            return SESSION_CHECK_SECONDS  # nothing to watch (an anonymous share viewer: the link is)
        if not self.session_key:
            return None
        if first:
            return session_expiry_left(self.session_key)
        return session_time_left(self.session_key, self.user_id)

    async def _watch_session(self) -> None:
        """Close 4401 once the session has ended (checked at its expiry and every
        SESSION_CHECK_SECONDS; logout and user saves are pushed); keeps the socket slot alive."""
        assert self.slots is not None
        next_check = expires_at = 0.0
        first = True
        while True:
            now = time.monotonic()
            if now >= next_check or now >= expires_at:
                left = await self.session_seconds_left(first=first)
                first = False
                if left is None:
                    await self.shut(CLOSE_UNAUTHENTICATED)
                    return
                now = time.monotonic()
                expires_at, next_check = now + left, now + SESSION_CHECK_SECONDS
            await asyncio.sleep(max(0.05, min(limits.SOCKET_REFRESH, next_check - now, expires_at - now)))
            await self.slots.refresh()

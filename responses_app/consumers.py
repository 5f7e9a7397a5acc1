"""`RequestConsumer` at /ws/requests/<uuid>/: one browser tab watching one logical request.

On connect: authenticate (owner or staff, else close 4403), send the latest view as a `snapshot`,
then live `patch` messages, then `terminal`. Messages are JSON objects with `type` and `revision`;
patches carry `base` too, so a client that sees `base` != its revision asks for a `snapshot`
instead of showing a hole. Disconnecting never cancels (Stop is an explicit `cancel` message), and
a reconnect never starts an upstream call nor counts the request again.

Hardening (the origin check is in routing.py): at most RELAY_MAX_SOCKETS_PER_USER sockets per
user across processes (limits.SocketSlots; more are closed 4429); frames past the per-socket
budget (RELAY_WS_FRAME_RATE/RELAY_WS_FRAME_BURST) are dropped unread and a socket that keeps
flooding is closed 4429; at most one snapshot request pending per socket; a cancel is honoured
and written once per request. When the session ends (logout, expiry, deletion) its sockets close
with 4401: at once on logout (a group message per session), otherwise at the latest when the
session's expiry or the next periodic check comes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import deque
from importlib import import_module
from typing import Any

import orjson
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.signals import user_logged_out
from django.core.cache import cache
from django.dispatch import receiver
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from . import limits, selectors, services
from .models import ResponseRequest
from .relay.hub import get_hub, group_name
from .relay.worker import cancel_request, start_request
from .streaming.view import apply_patch

logger = logging.getLogger(__name__)

OUTBOX_SIZE = 64  # messages; a viewer further behind than this drops patches and resyncs
PING_SECONDS = 20.0
RECENT_PATCHES = 128  # kept to bring a checkpoint up to date for viewers of a remote runner
RESYNC = "resync"  # outbox marker: send a fresh snapshot instead of the patches dropped before it
MAX_FRAME_CHARS = 4096  # every client message is a few dozen bytes
SESSION_CHECK_SECONDS = 60.0  # a session deleted or invalidated elsewhere is noticed this soon
CANCEL_MEMORY_SECONDS = 24 * 3600
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_TOO_MANY = 4429


def session_group(session_key: str) -> str:
    return "relay-session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


@receiver(user_logged_out, dispatch_uid="relay-close-sockets-on-logout")
def close_sockets_on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """Every socket opened with this session closes 4401 now, in any process (through the layer)."""
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    layer = get_channel_layer()
    if session_key and layer is not None:
        try:
            async_to_sync(layer.group_send)(session_group(session_key), {"type": "relay.logout"})
        except Exception:  # the logout itself must succeed; its sockets then close at the next check
            logger.exception("could not tell the sockets of a logged-out session to close")


class RequestConsumer(AsyncWebsocketConsumer):
    request_id: str
    request: ResponseRequest

    async def connect(self) -> None:
        self.request_id = str(self.scope["url_route"]["kwargs"]["request_id"])
        user = self.scope.get("user")
        request = await self._load(user)
        if request is None:
            # Accept first: a close before the handshake reaches browsers as a bare 1006, and the
            # client must be able to tell "not yours" (4403, stop retrying) from a network blip.
            await self.accept()
            await self.close(code=CLOSE_FORBIDDEN)
            return
        assert user is not None
        self.slots = limits.SocketSlots(user_id=user.pk, owner=self.channel_name)
        if not await self.slots.acquire():
            await self.accept()
            await self.close(code=CLOSE_TOO_MANY)
            return
        self.request = request
        self.sent_revision = -1
        self.outbox: asyncio.Queue[str] = asyncio.Queue(maxsize=OUTBOX_SIZE)
        self.overflows = 0
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_PATCHES)
        self.budget = limits.FrameBudget(rate=settings.RELAY_WS_FRAME_RATE, burst=settings.RELAY_WS_FRAME_BURST,
                                         now=time.monotonic())
        self.snapshot_pending = False
        self.cancel_sent = False
        self.closing = False
        self.session_key: str | None = self.scope["session"].session_key if "session" in self.scope else None
        if "session" in self.scope and not self.session_key:
            await self.accept()
            await self._close(CLOSE_UNAUTHENTICATED)
            await self.slots.release()
            return
        await self.accept()
        if self.session_key:
            await self.channel_layer.group_add(session_group(self.session_key), self.channel_name)
        self.watchdog = asyncio.get_running_loop().create_task(self._watch_session())
        hub = get_hub()
        if hub.fanout:  # before reading anything: no patch published from now on is missed
            await self.channel_layer.group_add(group_name(self.request_id), self.channel_name)
        hub.attach(self.request_id, self)
        reconnect = "reconnect=1" in self.scope.get("query_string", b"").decode()
        await self._count(reconnect)
        await self._send_snapshot()  # before the writer starts, so it is the first message
        self.writer = asyncio.get_running_loop().create_task(self._write())
        if request.status == ResponseRequest.Status.PENDING:
            await start_request(self.request_id)  # a lost start message is retried, single-flight
        elif request.status == ResponseRequest.Status.STREAMING and hub.runner(self.request_id) is None:
            await start_request(self.request_id)  # takes over only if the owner's lease ran out

    async def disconnect(self, code: int) -> None:
        if not hasattr(self, "slots"):
            return
        try:
            if hasattr(self, "watchdog"):
                self.watchdog.cancel()
            if hasattr(self, "writer"):
                get_hub().detach(self.request_id, self)
                self.writer.cancel()
                if get_hub().fanout:
                    await self.channel_layer.group_discard(group_name(self.request_id), self.channel_name)
            session_key = getattr(self, "session_key", None)
            if session_key and hasattr(self, "watchdog"):
                await self.channel_layer.group_discard(session_group(session_key), self.channel_name)
        finally:
            await self.slots.release()  # whatever failed above, the slot is not leaked

    async def dispatch(self, message: dict[str, Any]) -> None:
        # The frame budget is applied before Channels' dispatch, which spends a thread hop
        # (close_old_connections) on every message: a flood of frames dropped here costs
        # microseconds each and never queues behind the database threads pages need.
        if message["type"] == "websocket.receive":
            if not hasattr(self, "budget") or self.closing:
                return  # refused at connect, or already closing
            if not self.budget.allow(time.monotonic()):
                if self.budget.exhausted:  # a client that keeps flooding is cut off
                    await self._close(CLOSE_TOO_MANY)
                return
        await super().dispatch(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        raw = text_data if text_data is not None else bytes_data or b""
        if len(raw) > MAX_FRAME_CHARS:
            kind = None
        else:
            try:
                message = orjson.loads(raw)
                kind = message.get("type") if isinstance(message, dict) else None
            except orjson.JSONDecodeError:
                kind = None
        if kind == "snapshot":
            if not self.snapshot_pending:  # one pending per socket: more would only repeat it
                self.snapshot_pending = True
                self._enqueue_resync()  # through the outbox, so it is ordered with the patches
        elif kind == "cancel":
            await self._cancel_once()
        elif kind == "ping":
            await self.send(text_data='{"type":"pong"}')
        else:
            await self.send(text_data=orjson.dumps({"type": "error", "message": "unknown message"}).decode())

    async def relay_logout(self, event: dict[str, Any]) -> None:
        """This socket's session was logged out (in any process)."""
        await self._close(CLOSE_UNAUTHENTICATED)

    async def _close(self, code: int) -> None:
        if not self.closing:
            self.closing = True
            await self.close(code=code)

    async def _watch_session(self) -> None:
        """Close 4401 once the session is no longer this user's (checked at its expiry and every
        SESSION_CHECK_SECONDS; logout is pushed at once); keeps the socket slot alive meanwhile."""
        next_check = expires_at = 0.0
        while True:
            now = time.monotonic()
            if now >= next_check or now >= expires_at:
                left = await self._session_seconds_left()
                if left is None:
                    await self._close(CLOSE_UNAUTHENTICATED)
                    return
                now = time.monotonic()
                expires_at, next_check = now + left, now + SESSION_CHECK_SECONDS
            await asyncio.sleep(max(0.05, min(limits.SOCKET_REFRESH, next_check - now, expires_at - now)))
            await self.slots.refresh()

    async def _cancel_once(self) -> None:
        if self.cancel_sent:
            return
        self.cancel_sent = True
        if await self._session_seconds_left() is None:  # logged out meanwhile: not honoured
            await self._close(CLOSE_UNAUTHENTICATED)
            return
        # One write per request, however many sockets (in however many processes) press Stop.
        if await cache.aadd(f"relay:cancel:{self.request_id}", 1, timeout=CANCEL_MEMORY_SECONDS):
            await self._cancel()

    # --- delivery -------------------------------------------------------------------------------

    def offer(self, message: dict[str, Any], text: str) -> None:
        """Called by the runner in this process: never waits; a full outbox drops the patch."""
        revision = message.get("revision", 0)
        if message["type"] == "patch" and revision <= self.sent_revision:
            return
        if message["type"] == "patch":
            self.recent.append(message)
        try:
            self.outbox.put_nowait(text)
        except asyncio.QueueFull:
            # Too far behind: the queued patches are worth less than a fresh snapshot. Drop them
            # all (bounded memory, and the runner never waits) and resync this viewer.
            self.overflows += 1
            self._enqueue_resync()
            if message["type"] != "patch":
                self.outbox.put_nowait(text)  # a terminal message is never dropped
            return
        if message["type"] == "patch":
            self.sent_revision = revision

    def _enqueue_resync(self) -> None:
        try:
            self.outbox.put_nowait(RESYNC)
        except asyncio.QueueFull:
            while not self.outbox.empty():
                self.outbox.get_nowait()
            self.outbox.put_nowait(RESYNC)

    async def relay_message(self, event: dict[str, Any]) -> None:
        """The same messages through the channel group, from a runner in another process."""
        text = event["text"]
        self.offer(orjson.loads(text), text)

    async def _write(self) -> None:
        # The hot path of every viewer: no task per message (as asyncio.wait_for would make) and
        # straight to the ASGI send, past the consumer's own send wrappers.
        outbox, send = self.outbox, self.base_send
        while True:
            if outbox.empty():
                try:
                    async with asyncio.timeout(PING_SECONDS):
                        text = await outbox.get()
                except TimeoutError:
                    text = '{"type":"ping"}'  # keeps proxies from cutting a long silent reasoning phase
            else:
                text = outbox.get_nowait()
            if text is RESYNC:
                self.snapshot_pending = False
                await self._send_snapshot()
            else:
                await send({"type": "websocket.send", "text": text})

    async def _send_snapshot(self) -> None:
        runner = get_hub().runner(self.request_id)
        if runner is not None:
            view = runner.snapshot()  # newer than the last commit, and consistent with its patches
            status = runner.status
        else:
            view, status = await self._committed_view()
            # A checkpoint is a patch boundary: chain the patches seen since, to be current.
            for patch in sorted(self.recent, key=lambda p: p["base"]):
                if patch["base"] == view["revision"]:
                    apply_patch(view, patch)
        self.sent_revision = view["revision"]
        text = orjson.dumps({"type": "snapshot", "revision": view["revision"], "status": status,
                             "view": view}).decode()
        await self.send(text_data=text)
        if status in ResponseRequest.TERMINAL or status == ResponseRequest.Status.UNKNOWN:
            await self.send(text_data=orjson.dumps({"type": "terminal", "status": status,
                                                    "revision": view["revision"]}).decode())

    # --- database ------------------------------------------------------------------------------

    @database_sync_to_async
    def _load(self, user: Any) -> ResponseRequest | None:
        if user is None:
            return None
        return selectors.request_get_for_user(user=user, request_id=self.request_id)

    @database_sync_to_async
    def _session_seconds_left(self) -> float | None:
        """Seconds until this socket's session expires; None once it is not this user's any more
        (logged out, flushed, expired, or the password changed). A socket opened without a session
        (only in tests that bypass AuthMiddlewareStack) has nothing to watch."""
        if "session" not in self.scope:
            return float(SESSION_CHECK_SECONDS)
        if not self.session_key:
            return None
        store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=self.session_key)
        data = store.load()  # a fresh read: empty once the session is gone or expired
        user = self.scope["user"]
        if str(data.get(SESSION_KEY)) != str(user.pk) or data.get(BACKEND_SESSION_KEY) is None:
            return None
        if not constant_time_compare(data.get(HASH_SESSION_KEY) or "", user.get_session_auth_hash()):
            return None
        if hasattr(store, "get_model_class"):  # database sessions: the stored expiry, not a new one
            expires = store.get_model_class().objects.filter(session_key=self.session_key).values_list(
                "expire_date", flat=True).first()
            if expires is None:
                return None
            return (expires - timezone.now()).total_seconds()
        return float(store.get_expiry_age())

    @database_sync_to_async
    def _committed_view(self) -> tuple[dict[str, Any], str]:
        request = ResponseRequest.objects.get(pk=self.request_id)
        return selectors.view_latest(request=request), request.status

    @database_sync_to_async
    def _count(self, reconnect: bool) -> None:
        services.request_count(request_id=self.request.pk, viewer_connections=1, reconnects=int(reconnect))

    async def _cancel(self) -> None:
        await database_sync_to_async(services.request_cancel)(request=self.request)
        await cancel_request(self.request_id)

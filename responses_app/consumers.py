"""`RequestConsumer` at /ws/requests/<uuid>/: one browser tab watching one logical request.

On connect: authenticate (owner or staff, else close 4403), send the latest view as a `snapshot`,
then live patches, then `terminal`. Messages are JSON objects with `type` and `revision`, except
patches: arrays in the wire format of streaming/wire.py, which carry their base too, so a client
that sees a base other than its revision asks for a `snapshot` instead of showing a hole. The
client names the protocol it reads (`?v=2`); a socket that names none or another one (a tab
loaded before this protocol, or after the next) gets snapshots only, at most one a second, each
saying which protocol this server speaks, so no tab misreads a patch. Disconnecting never cancels
(Stop is an explicit `cancel` message), and a reconnect never starts an upstream call nor counts
the request again.

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
import contextlib
import hashlib
import logging
import time
from importlib import import_module
from typing import Any
from urllib.parse import parse_qs

import orjson
from asgiref.sync import async_to_sync
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from channels.sessions import InstanceSessionWrapper
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from . import limits, logcontext, metrics, selectors, services
from .conf import app_settings
from .models import ResponseRequest
from .relay.dbthreads import ws_call, ws_db
from .relay.hub import get_hub
from .relay.worker import cancel_request, start_request
from .streaming.view import apply_patch
from .streaming.wire import PROTOCOL
from .wsthreads import PooledConsumerMixin

logger = logging.getLogger(__name__)

OUTBOX_SIZE = 64  # messages; a viewer further behind than this drops patches and resyncs
PING_SECONDS = 20.0
RESYNC_MIN_S = 1.0  # at most one snapshot per viewer per second (about a checkpoint interval)
RESYNC = "resync"  # outbox marker: send a fresh snapshot instead of the patches dropped before it
IDLE = "idle"  # outbox marker: nothing sent for PING_SECONDS (see _idle_check)
MAX_FRAME_CHARS = 4096  # every client message is a few dozen bytes
SESSION_CHECK_SECONDS = 60.0  # a session deleted or invalidated elsewhere is noticed this soon
CANCEL_MEMORY_SECONDS = 24 * 3600
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_TOO_MANY = 4429
CLOSE_WRITER_FAILED = 1011  # the server failed this socket: reconnect (and resync)


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


class RequestConsumer(PooledConsumerMixin, AsyncWebsocketConsumer):
    request_id: str
    request: ResponseRequest
    # Delivery state (see `offer`), per socket.
    sent_revision = -1  # the revision the client holds
    overflows = resyncs = 0
    snapshots_only = False  # the client reads another protocol than PROTOCOL
    _resync_pending = _resync_queued = False
    _last_snapshot = 0.0
    _lag_text: str | None = None  # the latest stamped patch queued, and its upstream arrival (metrics)
    _lag_at = 0.0

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
        logcontext.bind(self.request_id, request.response_id or None)  # this socket's task logs name it
        self.outbox: asyncio.Queue[str] = asyncio.Queue(maxsize=OUTBOX_SIZE)
        self.budget = limits.FrameBudget(rate=app_settings.WS_FRAME_RATE, burst=app_settings.WS_FRAME_BURST,
                                         now=time.monotonic())
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
        await hub.attach(self.request_id, self)  # before reading anything: nothing published from now on is missed
        query = parse_qs(self.scope.get("query_string", b"").decode())
        reconnect = query.get("reconnect") == ["1"]
        self.snapshots_only = query.get("v") != [str(PROTOCOL)]
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
            session_key = getattr(self, "session_key", None)
            if session_key and hasattr(self, "watchdog"):
                await self.channel_layer.group_discard(session_group(session_key), self.channel_name)
        finally:
            await self.slots.release()  # whatever failed above, the slot is not leaked

    async def dispatch(self, message: dict[str, Any]) -> None:
        # The frame budget is applied before dispatching: a flood of frames dropped here costs
        # microseconds each. Dispatch itself no longer spends a hop on the process's one
        # thread-sensitive thread per message (wsthreads.PooledConsumerMixin).
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
            self._enqueue_resync()  # one pending per socket (more would only repeat it), in order with the patches
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
        if await limits.cache_call("add", f"relay:cancel:{self.request_id}", 1, timeout=CANCEL_MEMORY_SECONDS):
            await self._cancel()

    # --- delivery -------------------------------------------------------------------------------

    def offer(self, message: dict[str, Any], text: str) -> None:
        """Called by the hub (a runner in this process, or fanout.py from another): never waits.

        The consumer knows the revision its client holds, so a gap is caught here, not in the
        browser: a patch that does not continue it (lost across processes, or dropped by a full
        outbox) and a heartbeat ahead of it both mean "behind". The patch is not sent (the client
        would only ask for a snapshot); a snapshot follows, at most one per RESYNC_MIN_S, so a
        viewer catches up in one step instead of a storm."""
        kind = message["type"]
        revision = message.get("revision", 0)
        if self.sent_revision < 0 and kind in ("patch", "ping"):
            return  # the first snapshot, being taken, is at least as new
        if kind == "patch":
            if revision <= self.sent_revision:
                return  # stale: the client has it
            if message["base"] != self.sent_revision or self._resync_pending or self.snapshots_only:
                self._resync_soon()
                return
        elif kind == "ping" and revision > self.sent_revision >= 0:
            self._resync_soon()
            return
        elif kind == "terminal" and self.snapshots_only and revision > self.sent_revision >= 0:
            self._enqueue_resync()  # the final view now; the snapshot of an ended request brings its terminal
            return
        try:
            self.outbox.put_nowait(text)
        except asyncio.QueueFull:
            # Too far behind: the queued patches are worth less than a fresh snapshot. Drop them
            # all (bounded memory, and the runner never waits) and resync this viewer; the
            # snapshot of an ended request is followed by its terminal again.
            self.overflows += 1
            while not self.outbox.empty():
                self.outbox.get_nowait()
            self._resync_queued = False
            self._enqueue_resync()
            if kind not in ("patch", "ping"):
                self.outbox.put_nowait(text)  # a terminal message is never dropped
            return
        if kind == "patch":
            self.sent_revision = revision
            if metrics.ARRIVED in message:
                self._lag_text, self._lag_at = text, message[metrics.ARRIVED]

    def _resync_soon(self) -> None:
        if self._resync_pending:
            return
        self._resync_pending = True  # patches wait for the snapshot
        loop = asyncio.get_running_loop()
        wait = max(0.0, self._last_snapshot + RESYNC_MIN_S - loop.time())
        loop.call_later(wait, self._resync_due)

    def _resync_due(self) -> None:
        if self._resync_pending:  # unless a snapshot went out meanwhile
            self._enqueue_resync()

    def _enqueue_resync(self) -> None:
        """At most one snapshot waits in the outbox, however often it is asked for."""
        self._resync_pending = True
        if self._resync_queued:
            return
        self._resync_queued = True
        try:
            self.outbox.put_nowait(RESYNC)
        except asyncio.QueueFull:  # what is queued is older than the snapshot anyway
            while not self.outbox.empty():
                self.outbox.get_nowait()
            self.outbox.put_nowait(RESYNC)

    async def _write(self) -> None:
        """The socket's one writer. If it fails (a database or layer error while it resyncs, say),
        the socket is closed so the tab reconnects at once, never left open and silent."""
        try:
            await self._write_loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # often the client went away mid-send: no traceback for that
            logger.warning("the writer of a viewer of %s failed (%r); closing its socket", self.request_id, exc)
            with contextlib.suppress(Exception):
                await self.close(code=CLOSE_WRITER_FAILED)

    def _frame_send(self) -> Any:
        """The ASGI send for the writer's frames: past Channels' session wrapper, which does
        nothing for a websocket frame (it saves the session only on the message types in its
        `save_message_types`, i.e. `http.response.start`) but read the lazy session twice per
        frame. Every other layer (the origin check, authentication) acts at connect only."""
        send = self.base_send
        wrapper = getattr(send, "__self__", None)
        while isinstance(wrapper, InstanceSessionWrapper) and getattr(send, "__func__", None) is \
                InstanceSessionWrapper.send and "websocket.send" not in wrapper.save_message_types:
            send = wrapper.real_send
            wrapper = getattr(send, "__self__", None)
        return send

    async def _write_loop(self) -> None:
        # The hot path of every viewer: no task and no timer per message (one idle timer per
        # socket, re-armed lazily by _idle_check) and straight to the ASGI send, past the
        # consumer's own send wrappers and the session's.
        outbox, send = self.outbox, self._frame_send()
        loop = asyncio.get_running_loop()
        self._sent_at = loop.time()
        self._idle_timer = loop.call_at(self._sent_at + PING_SECONDS, self._idle_check)
        try:
            while True:
                text = outbox.get_nowait() if not outbox.empty() else await outbox.get()
                if text is IDLE:
                    if loop.time() - self._sent_at < PING_SECONDS:
                        continue  # something went out since it was queued
                    text = await self._idle()
                if text is RESYNC:
                    self._resync_queued = False
                    await self._send_snapshot()
                else:
                    await send({"type": "websocket.send", "text": text})
                    if text is self._lag_text:
                        self._lag_text = None
                        metrics.patch_sent(self._lag_at)
                self._sent_at = loop.time()
        finally:
            self._idle_timer.cancel()

    def _idle_check(self) -> None:
        """Nothing sent for PING_SECONDS (the last send ended that long ago): the writer sends a ping."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = self._sent_at + PING_SECONDS
        if now >= due:
            if self.outbox.empty():  # else the writer is busy: it sends first, and is checked again
                self.outbox.put_nowait(IDLE)
            due = now + PING_SECONDS
        self._idle_timer = loop.call_at(due, self._idle_check)

    async def _idle(self) -> str:
        """Nothing sent for PING_SECONDS: a ping (it keeps proxies from cutting a long silent
        reasoning phase) carrying what this viewer holds. With no runner here, the request may
        have ended elsewhere with its `terminal` lost on the way: then the ending is sent again."""
        if get_hub().runner(self.request_id) is None and await self._ended():
            return RESYNC  # the snapshot of an ended request is followed by its terminal
        return orjson.dumps({"type": "ping", "revision": self.sent_revision}).decode()

    async def _send_snapshot(self) -> None:
        hub = get_hub()
        runner = hub.runner(self.request_id)
        if runner is not None:
            view, status = await runner.live_view()  # newer than the last commit, at a patch boundary
        else:
            view, status = await self._committed_view()
            # A checkpoint is a patch boundary: chain the patches this process heard since, to be current.
            for patch in hub.recent_patches(self.request_id):
                if patch["base"] == view["revision"]:
                    apply_patch(view, patch)
        if self.sent_revision >= 0:
            metrics.VIEWER_RESYNCS.inc()  # not the first snapshot
        self._resync_pending = False
        self._last_snapshot = asyncio.get_running_loop().time()
        self.resyncs += 1
        self.sent_revision = view["revision"]
        text = orjson.dumps({"type": "snapshot", "revision": view["revision"], "status": status,
                             "protocol": PROTOCOL, "view": view}).decode()
        await self.send(text_data=text)
        if status in ResponseRequest.ENDED:
            await self.send(text_data=orjson.dumps({"type": "terminal", "status": status,
                                                    "revision": view["revision"]}).decode())

    # --- database (on the websocket pool: dbthreads.ws_call) ---------------------------------------

    @ws_db
    def _load(self, user: Any) -> ResponseRequest | None:
        if user is None:
            return None
        return selectors.request_get_for_user(user=user, request_id=self.request_id)

    @ws_db
    def _ended(self) -> bool:
        return selectors.request_status(request_id=self.request.pk) in ResponseRequest.ENDED

    @ws_db
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

    @ws_db
    def _committed_view(self) -> tuple[dict[str, Any], str]:
        request = ResponseRequest.objects.get(pk=self.request_id)
        return selectors.view_latest(request=request), request.status

    @ws_db
    def _count(self, reconnect: bool) -> None:
        services.request_count(request_id=self.request.pk, viewer_connections=1, reconnects=int(reconnect))

    async def _cancel(self) -> None:
        await ws_call(services.request_cancel)(request=self.request)
        await cancel_request(self.request_id)

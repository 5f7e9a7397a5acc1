"""`RequestConsumer` at /ws/requests/<uuid>/: one browser tab watching one logical request.

On connect: authenticate (owner or staff, else close 4403), send the latest view as a `snapshot`,
then live `patch` messages, then `terminal`. Messages are JSON objects with `type` and `revision`;
patches carry `base` too, so a client that sees `base` != its revision asks for a `snapshot`
instead of showing a hole. Disconnecting never cancels (Stop is an explicit `cancel` message), and
a reconnect never starts an upstream call nor counts the request again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from . import selectors, services
from .models import ResponseRequest
from .relay.hub import get_hub, group_name
from .relay.worker import cancel_request, start_request
from .streaming.view import apply_patch

logger = logging.getLogger(__name__)

OUTBOX_SIZE = 64  # messages; a viewer further behind than this drops patches and resyncs
PING_SECONDS = 20.0
RESYNC_MIN_S = 1.0  # at most one snapshot per viewer per second (about a checkpoint interval)
GROUP_JOIN_S = 3.0  # joining the channel group waits no longer (Redis restarting)
RESYNC = "resync"  # outbox marker: send a fresh snapshot instead of the patches dropped before it


class RequestConsumer(AsyncWebsocketConsumer):
    request_id: str
    request: ResponseRequest
    # Delivery state (see `offer`), per socket.
    sent_revision = -1  # the revision the client holds
    overflows = resyncs = 0
    _resync_pending = _resync_queued = False
    _last_snapshot = 0.0

    async def connect(self) -> None:
        self.request_id = str(self.scope["url_route"]["kwargs"]["request_id"])
        user = self.scope.get("user")
        request = await self._load(user)
        if request is None:
            # Accept first: a close before the handshake reaches browsers as a bare 1006, and the
            # client must be able to tell "not yours" (4403, stop retrying) from a network blip.
            await self.accept()
            await self.close(code=4403)
            return
        self.request = request
        self.outbox: asyncio.Queue[str] = asyncio.Queue(maxsize=OUTBOX_SIZE)
        await self.accept()
        hub = get_hub()
        if hub.fanout:  # before reading anything: no patch published from now on is missed
            try:
                async with asyncio.timeout(GROUP_JOIN_S):
                    await self.channel_layer.group_add(group_name(self.request_id), self.channel_name)
            except Exception:  # Redis away: this viewer converges by heartbeat and resync meanwhile
                logger.warning("group_add for %s failed; relying on resyncs", self.request_id, exc_info=True)
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
        if not hasattr(self, "writer"):
            return
        get_hub().detach(self.request_id, self)
        self.writer.cancel()
        if get_hub().fanout:
            await self.channel_layer.group_discard(group_name(self.request_id), self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            message = orjson.loads(text_data or bytes_data or b"")
            kind = message.get("type") if isinstance(message, dict) else None
        except orjson.JSONDecodeError:
            kind = None
        if kind == "snapshot":
            self._enqueue_resync()  # through the outbox, so it is ordered with the patches
        elif kind == "cancel":
            await self._cancel()
        elif kind == "ping":
            await self.send(text_data='{"type":"pong"}')
        else:
            await self.send(text_data=orjson.dumps({"type": "error", "message": "unknown message"}).decode())

    # --- delivery -------------------------------------------------------------------------------

    def offer(self, message: dict[str, Any], text: str) -> None:
        """Called by the runner in this process (or `relay_message`): never waits.

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
            if message["base"] != self.sent_revision or self._resync_pending:
                self._resync_soon()
                return
        elif kind == "ping" and revision > self.sent_revision >= 0:
            self._resync_soon()
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

    async def relay_message(self, event: dict[str, Any]) -> None:
        """The same messages through the channel group, from a runner in another process."""
        text = event["text"]
        message = orjson.loads(text)
        if message["type"] == "patch":
            get_hub().remember(self.request_id, message)
        self.offer(message, text)

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
                    text = await self._idle()
            else:
                text = outbox.get_nowait()
            if text is RESYNC:
                self._resync_queued = False
                await self._send_snapshot()
            else:
                await send({"type": "websocket.send", "text": text})

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
        self._resync_pending = False
        self._last_snapshot = asyncio.get_running_loop().time()
        self.resyncs += 1
        self.sent_revision = view["revision"]
        text = orjson.dumps({"type": "snapshot", "revision": view["revision"], "status": status,
                             "view": view}).decode()
        await self.send(text_data=text)
        if status in ResponseRequest.ENDED:
            await self.send(text_data=orjson.dumps({"type": "terminal", "status": status,
                                                    "revision": view["revision"]}).decode())

    # --- database ------------------------------------------------------------------------------

    @database_sync_to_async
    def _load(self, user: Any) -> ResponseRequest | None:
        if user is None:
            return None
        return selectors.request_get_for_user(user=user, request_id=self.request_id)

    @database_sync_to_async
    def _ended(self) -> bool:
        return selectors.request_status(request_id=self.request.pk) in ResponseRequest.ENDED

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

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
from collections import deque
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
RECENT_PATCHES = 128  # kept to bring a checkpoint up to date for viewers of a remote runner
RESYNC = "resync"  # outbox marker: send a fresh snapshot instead of the patches dropped before it


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
            await self.close(code=4403)
            return
        self.request = request
        self.sent_revision = -1
        self.outbox: asyncio.Queue[str] = asyncio.Queue(maxsize=OUTBOX_SIZE)
        self.overflows = 0
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_PATCHES)
        await self.accept()
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
                await self._send_snapshot()
            else:
                await send({"type": "websocket.send", "text": text})

    async def _send_snapshot(self) -> None:
        runner = get_hub().runner(self.request_id)
        if runner is not None:
            view, status = await runner.live_view()  # newer than the last commit, at a patch boundary
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
    def _committed_view(self) -> tuple[dict[str, Any], str]:
        request = ResponseRequest.objects.get(pk=self.request_id)
        return selectors.view_latest(request=request), request.status

    @database_sync_to_async
    def _count(self, reconnect: bool) -> None:
        services.request_count(request_id=self.request.pk, viewer_connections=1, reconnects=int(reconnect))

    async def _cancel(self) -> None:
        await database_sync_to_async(services.request_cancel)(request=self.request)
        await cancel_request(self.request_id)

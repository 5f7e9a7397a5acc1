"""The one writer of a request socket: its cursor's outbox to the client, in order.

A patch or terminal goes out as queued; a RESYNC marker becomes a snapshot (the live view when the
runner is in this process, else the latest committed view with the patches heard since,
`follow.current_view`), followed by `terminal` when the request has ended; after PING_SECONDS with
nothing sent, a ping carrying the client's revision (it keeps proxies from cutting a long silent
reasoning phase). With no runner here the request may have ended elsewhere with its `terminal`
lost on the way: then the ping is a snapshot instead, and the ending is sent again.

If the writer fails (a database or layer error while it resyncs, say) the socket is closed with
1011, so the tab reconnects at once and is never left open and silent.

The hot path of every viewer: no task and no timer per message (one idle timer per socket,
re-armed lazily), and frames go straight to the ASGI send past the session wrapper (`frame_send`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from channels.sessions import InstanceSessionWrapper

from .. import metrics, selectors
from ..follow import current_view
from ..models import ResponseRequest
from ..relay.dbthreads import ws_call
from ..relay.hub import get_hub
from ..streaming.wire import PROTOCOL
from .cursor import IDLE, RESYNC, Cursor

logger = logging.getLogger(__name__)

PING_SECONDS = 20.0
CLOSE_WRITER_FAILED = 1011  # the server failed this socket: reconnect (and resync)

Send = Callable[[dict[str, Any]], Awaitable[None]]


def frame_send(send: Send) -> Send:
    """The ASGI send for a socket's frames: past Channels' session wrapper, which does nothing for
    a websocket frame (it saves the session only on the message types in its
    `save_message_types`, i.e. `http.response.start`) but read the lazy session twice per frame.
    Every other layer (the origin check, authentication) acts at connect only."""
    wrapper = getattr(send, "__self__", None)
    while isinstance(wrapper, InstanceSessionWrapper) and getattr(send, "__func__", None) is \
            InstanceSessionWrapper.send and "websocket.send" not in wrapper.save_message_types:
        send = wrapper.real_send
        wrapper = getattr(send, "__self__", None)
    return send


class Writer:
    def __init__(self, request_id: str, cursor: Cursor, send: Send, close: Callable[[int], Awaitable[None]]) -> None:
        self.request_id = request_id
        self.cursor = cursor
        self.send = frame_send(send)
        self.close = close
        self.task: asyncio.Task[None] | None = None
        self._sent_at = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._write())

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def _write(self) -> None:
        try:
            await self._write_loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # often the client went away mid-send: no traceback for that
            logger.warning("the writer of a viewer of %s failed (%r); closing its socket", self.request_id, exc)
            with contextlib.suppress(Exception):
                await self.close(CLOSE_WRITER_FAILED)

    async def _write_loop(self) -> None:
        cursor, send = self.cursor, self.send
        outbox = cursor.outbox
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
                    cursor.resync_taken()
                    await self.snapshot()
                else:
                    await send({"type": "websocket.send", "text": text})
                    if text is cursor.lag_text:
                        cursor.lag_text = None
                        metrics.patch_sent(cursor.lag_at)
                self._sent_at = loop.time()
        finally:
            self._idle_timer.cancel()

    def _idle_check(self) -> None:
        """Nothing sent for PING_SECONDS (the last send ended that long ago): the writer sends a ping."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = self._sent_at + PING_SECONDS
        if now >= due:
            self.cursor.idle()  # unless the writer is busy: it sends first, and is checked again
            due = now + PING_SECONDS
        self._idle_timer = loop.call_at(due, self._idle_check)

    async def _idle(self) -> str:
        if get_hub().runner(self.request_id) is None and await self._ended():
            return RESYNC
        return orjson.dumps({"type": "ping", "revision": self.cursor.sent_revision}).decode()

    async def _ended(self) -> bool:
        return await ws_call(selectors.request_status)(request_id=self.request_id) in ResponseRequest.ENDED

    async def snapshot(self) -> None:
        """The view as it stands now, then `terminal` if the request has ended."""
        view, status = await current_view(self.request_id, own_copy=False)
        if self.cursor.stale(view["revision"], status in ResponseRequest.ENDED):
            return
        if self.cursor.snapshot_sent(view["revision"]):
            metrics.VIEWER_RESYNCS.inc()
        send = self.send
        await send({"type": "websocket.send", "text": orjson.dumps({
            "type": "snapshot", "revision": view["revision"], "status": status, "protocol": PROTOCOL,
            "view": view}).decode()})
        if status in ResponseRequest.ENDED:
            await send({"type": "websocket.send", "text": orjson.dumps({
                "type": "terminal", "status": status, "revision": view["revision"]}).decode()})

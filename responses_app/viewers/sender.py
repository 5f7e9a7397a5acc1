"""The one sender of a request socket: its cursor's outbox to the client, in order.

A patch or terminal goes out as queued; a RESYNC marker becomes a snapshot (the live view when the
runner is in this process, else the latest committed view with the patches heard since,
`follow.current_view`), followed by `terminal` when the request has ended; after SILENCE_S with
nothing sent, a ping carrying the client's revision (it keeps proxies from cutting a long silent
reasoning phase), or a snapshot and the ending again when the request ended elsewhere with its
`terminal` lost on the way (`follow.ended_elsewhere`). What goes when is the cursor's
(cursor.py); the follower (follow.py) reads its cursor the same way.

If the sender fails (a database or layer error while it resyncs, say) the socket is closed with
1011, so the tab reconnects at once and is never left open and silent.

The hot path of every viewer: no task and no timer per message (one silence timer per socket,
re-armed lazily), and frames go straight to the ASGI send past the session wrapper (`frame_send`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from ..compat import past_session_wrapper
from ..models import ResponseRequest
from ..ops import metrics
from ..relay.hub import get_hub
from ..streaming.wire import PROTOCOL
from .cursor import IDLE, RESYNC, Cursor
from .follow import behind, current_view, ended_elsewhere

logger = logging.getLogger(__name__)

CLOSE_SENDER_FAILED = 1011  # the server failed this socket: reconnect (and resync)

Send = Callable[[dict[str, Any]], Awaitable[None]]


def frame_send(send: Send) -> Send:
    """The ASGI send for a socket's frames: past Channels' session wrapper, which does nothing for
    a websocket frame (it saves the session only on `http.response.start`) but read the lazy
    session twice per frame (a private reach-in: compat.py). Every other layer (the origin check,
    authentication) acts at connect only."""
    return past_session_wrapper(send)


class Sender:
    def __init__(self, request_id: str, cursor: Cursor, send: Send, close: Callable[[int], Awaitable[None]]) -> None:
        self.request_id = request_id
        self.cursor = cursor
        self.send = frame_send(send)
        self.close = close
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._write())

    def stop(self) -> None:
        task, self.task = self.task, None  # the cancelled task keeps its CancelledError, whose frames hold this
        if task is not None:
            task.cancel()

    async def _write(self) -> None:
        try:
            await self._write_loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # often the client went away mid-send: no traceback for that
            # A client gone (uvicorn's ClientDisconnected is an OSError) is no news: a tab that moved
            # to another process closes its old socket while patches are on their way to it.
            logger.log(logging.DEBUG if isinstance(exc, OSError) else logging.WARNING,
                       "the sender of a viewer of %s failed (%r); closing its socket", self.request_id, exc)
            with contextlib.suppress(Exception):
                await self.close(CLOSE_SENDER_FAILED)

    async def _write_loop(self) -> None:
        cursor, send = self.cursor, self.send
        outbox, take, clock = cursor.outbox, cursor.take, asyncio.get_running_loop().time
        cursor.sent()
        cursor.watch_silence()
        try:
            while True:
                # `take` inlined for a queued text, the hot path (see bench/README.md, "Viewer path").
                text = outbox.get_nowait() if not outbox.empty() else None
                if text is None or text is IDLE or text is RESYNC:
                    text = await take(text)
                    if text is IDLE:
                        text = await self._idle()
                if text is RESYNC:
                    await self.snapshot()
                else:
                    await send({"type": "websocket.send", "text": text})
                    if text is cursor.lag_text:
                        cursor.lag_text = None
                        metrics.patch_sent(cursor.lag_at)
                cursor.sent_at = clock()
        finally:
            cursor.stop()

    async def _idle(self) -> str:
        if await ended_elsewhere(self.request_id):
            return RESYNC
        return orjson.dumps({"type": "ping", "revision": self.cursor.sent_revision}).decode()

    async def snapshot(self) -> None:
        """The view as it stands now, then `terminal` if the request has ended."""
        view, status = await current_view(self.request_id, own_copy=False)
        ended, late = status in ResponseRequest.ENDED, behind(self.request_id, view, status)
        moved = self.cursor.sent_revision < 0 and self.cursor.holds >= 0 and not ended  # a tab moved here
        stale = self.cursor.stale(view["revision"], ended, late)
        if stale or late or moved:
            # The client, or this process, holds more than is committed; or a tab moved here from
            # another process was likely sent more: the runner commits and sends its live view.
            get_hub().ask_commit(self.request_id)
        if stale:
            return
        if self.cursor.snapshot_sent(view["revision"]):
            metrics.VIEWER_RESYNCS.inc()
        send = self.send
        await send({"type": "websocket.send", "text": orjson.dumps({
            "type": "snapshot", "revision": view["revision"], "status": status, "protocol": PROTOCOL,
            "view": view}).decode()})
        if ended:
            await send({"type": "websocket.send", "text": orjson.dumps({
                "type": "terminal", "status": status, "revision": view["revision"]}).decode()})
        elif late:
            self.cursor.catch_up()  # newer than the client, older than what is heard here: again soon

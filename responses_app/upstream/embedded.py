"""The built-in simulator as the embedded default upstream, reached in-process.

One simulator app per process serves both `/simulator/v1` over HTTP (project/asgi.py mounts
`simulator_app()`) and the relay's own calls, which go through `ASGIStreamTransport` instead of
the network: the relay reaches it whatever host or port the server was started on, and a restart
forgets its stored responses, as a provider forgets expired ones.

The HTTP calls go through `simulator.inprocess.ASGIStreamTransport` (each body chunk handed over
as the app sends it; the one in-process HTTP driver).

WebSocket mode (RELAY_UPSTREAM_TRANSPORT=websocket) reaches it the same way: `EmbeddedWebSocket`
is the client end of a `websocket` scope run in-process, with the calls the relay makes of a
`websockets` client connection (`send`, `recv`, `close`), frames passed as strings.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..conf import app_settings
from ..simulator import SimulatorApp, create_app

EMBEDDED_BASE_URL = "http://embedded-simulator/v1"
_QUEUE_FRAMES = 1024  # a socket's buffers: the app waits when the reader is behind

_app: SimulatorApp | None = None


def simulator_app() -> SimulatorApp:
    """The process's simulator: the same store for HTTP clients and for the relay."""
    global _app
    if _app is None:
        _app = create_app(api_key=app_settings.SIMULATOR_API_KEY)
    return _app


class EmbeddedClosed(Exception):
    """The in-process socket is closed: `code` and `reason` as a close frame gives them."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"closed ({code} {reason})".strip())
        self.code = code
        self.reason = reason


class EmbeddedRefused(Exception):
    """The app refused the handshake with an HTTP answer (a bad key)."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"handshake refused: HTTP {status}")
        self.status = status
        self.body = body


class EmbeddedWebSocket:
    """The client end of a WebSocket to an ASGI app in this process."""

    def __init__(self) -> None:
        self._inbound: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._outbound: asyncio.Queue[str | EmbeddedClosed] = asyncio.Queue(maxsize=_QUEUE_FRAMES)
        self._closed: EmbeddedClosed | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def connect(cls, app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> EmbeddedWebSocket:
        self = cls()
        loop = asyncio.get_running_loop()
        accepted: asyncio.Future[None] = loop.create_future()
        refusal: list[int] = []
        scope = {
            "type": "websocket", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "ws",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": headers, "client": ("127.0.0.1", 0), "server": ("embedded-simulator", 80),
            "subprotocols": [], "extensions": {"websocket.http.response": {}},
        }
        self._inbound.put_nowait({"type": "websocket.connect"})

        async def send(message: dict[str, Any]) -> None:
            kind = message["type"]
            if kind == "websocket.accept":
                accepted.set_result(None)
            elif kind == "websocket.send":
                text = message.get("text")
                await self._outbound.put(text if text is not None else bytes(message["bytes"]).decode())
            elif kind == "websocket.close":
                closed = EmbeddedClosed(int(message.get("code") or 1000), str(message.get("reason") or ""))
                if not accepted.done():
                    accepted.set_exception(EmbeddedRefused(403, closed.reason.encode()))
                else:
                    self._end(closed)
            elif kind == "websocket.http.response.start":
                refusal.append(int(message["status"]))
            elif kind == "websocket.http.response.body" and not accepted.done():
                body = bytes(message.get("body") or b"")
                accepted.set_exception(EmbeddedRefused(refusal[0] if refusal else 403, body))

        def finished(task: asyncio.Task[None]) -> None:
            if not accepted.done():
                accepted.set_exception(EmbeddedRefused(500, b"the app ended before the handshake"))
            self._end(EmbeddedClosed(1006, "the app ended"))

        self._task = loop.create_task(app(scope, self._inbound.get, send), name="embedded-simulator-ws")
        self._task.add_done_callback(finished)
        try:
            await accepted
        except BaseException:
            await self.close()
            raise
        return self

    def _end(self, closed: EmbeddedClosed) -> None:
        if self._closed is None:
            self._closed = closed
            self._inbound.put_nowait({"type": "websocket.disconnect", "code": closed.code})
            try:
                self._outbound.put_nowait(closed)
            except asyncio.QueueFull:
                pass  # the reader sees it once it drained the queue (recv checks `_closed`)

    async def send(self, text: str) -> None:
        if self._closed is not None:
            raise self._closed
        self._inbound.put_nowait({"type": "websocket.receive", "text": text})

    async def recv(self) -> str:
        if self._outbound.empty() and self._closed is not None:
            raise self._closed
        item = await self._outbound.get()
        if isinstance(item, EmbeddedClosed):
            raise item
        return item

    async def close(self) -> None:
        self._end(EmbeddedClosed(1000, ""))
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 1.0)
            except TimeoutError:
                task.cancel()
            except asyncio.CancelledError:
                task.cancel()
                raise
            except Exception:  # the app's own failure ends its socket, not the caller
                pass

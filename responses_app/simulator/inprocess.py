"""Drive an ASGI app (the simulator) in-process, without a server: the one in-process HTTP driver.

`ASGIStreamTransport` is an httpx transport: the relay's calls to the embedded simulator
(embedded.py), the moderation endpoint's, and `request` below (recording fixtures, quick checks).
httpx's own `ASGITransport` reads the whole body before it returns a response, which no stream
survives (a paced answer would arrive all at once at the end). This transport hands each body
chunk over as the app sends it, through a small bounded queue (the app waits when the reader is
behind), and cancels the app when the reader closes the response (Stop, a dropped viewer).
No Django here: the simulator is a plain ASGI app.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

_QUEUE_CHUNKS = 64
_END = b""


async def request(app: Any, method: str, path: str, payload: dict[str, Any] | None = None,
                  query: bytes = b"") -> tuple[int, bytes]:
    """One request through the ASGI interface; the status and the whole body."""
    url = path + ("?" + query.decode() if query else "")
    async with httpx.AsyncClient(transport=ASGIStreamTransport(app), base_url="http://simulator") as client:
        response = await client.request(method, url, content=orjson.dumps(payload) if payload is not None else b"",
                                        headers={"content-type": "application/json"})
        return response.status_code, response.content


class ASGIStreamTransport(httpx.AsyncBaseTransport):
    def __init__(self, app: Any) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        url = request.url
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": request.method, "scheme": url.scheme, "path": url.path,
            "raw_path": url.raw_path.split(b"?", 1)[0], "query_string": url.query, "root_path": "",
            "headers": [(key.lower(), value) for key, value in request.headers.raw],
            "client": ("127.0.0.1", 0), "server": (url.host, url.port or 80),
        }
        loop = asyncio.get_running_loop()
        started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = loop.create_future()
        chunks: asyncio.Queue[bytes] = asyncio.Queue(maxsize=_QUEUE_CHUNKS)
        closed = asyncio.Event()
        request_sent = False

        async def receive() -> dict[str, Any]:
            nonlocal request_sent
            if not request_sent:
                request_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await closed.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if closed.is_set():
                return
            if message["type"] == "http.response.start":
                started.set_result((message["status"], list(message.get("headers") or [])))
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    await chunks.put(message["body"])
                if not message.get("more_body", False):
                    await chunks.put(_END)

        def finished(task: asyncio.Task[None]) -> None:
            error = None if task.cancelled() else task.exception()
            if not started.done():
                started.set_exception(httpx.RemoteProtocolError(
                    f"the embedded simulator ended without a response: {error!r}", request=request))
            elif not closed.is_set():
                try:
                    chunks.put_nowait(_END)  # an app that stops mid-body ends the stream
                except asyncio.QueueFull:
                    pass

        task = loop.create_task(self.app(scope, receive, send), name="embedded-simulator")
        task.add_done_callback(finished)
        try:
            status, headers = await started
        except BaseException:
            task.cancel()
            raise
        return httpx.Response(status, headers=headers, request=request,
                              stream=_Body(chunks, closed, task))


class _Body(httpx.AsyncByteStream):
    def __init__(self, chunks: asyncio.Queue[bytes], closed: asyncio.Event, task: asyncio.Task[None]) -> None:
        self._chunks = chunks
        self._closed = closed
        self._task = task

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self._chunks.get()
            if not chunk:  # _END
                return
            yield chunk

    async def aclose(self) -> None:
        self._closed.set()
        if not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                if not self._task.cancelled():
                    raise  # the reader itself is being cancelled
            except Exception:  # the app's own failure ends its stream, not the reader
                pass

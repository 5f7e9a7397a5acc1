"""ASGI plumbing: bodies, JSON answers, the disconnect watch and the SSE writer."""

from __future__ import annotations

import asyncio
import uuid
from bisect import bisect_right
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from .api_errors import ApiError, bad_request
from .dialects import trailer
from .store import SimResponse

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY = 32 * 1024 * 1024
KEEPALIVE = b": keep-alive\n\n"
_PREFIXES: dict[str, bytes] = {}


def sse_prefix(event_type: str) -> bytes:
    """`event: <type>` and the start of the `data:` line, as the API frames every event."""
    prefix = _PREFIXES.get(event_type)
    if prefix is None:
        prefix = b"event: " + event_type.encode() + b"\ndata: "
        if len(_PREFIXES) < 256:
            _PREFIXES[event_type] = prefix
    return prefix


def sse_data(block: bytes) -> bytes:
    """The JSON of one framed block (WebSocket mode sends it alone)."""
    return block[block.index(b"data: ") + 6 : -2]


def request_id() -> bytes:
    return f"req_{uuid.uuid4().hex}".encode()


async def read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionResetError
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise bad_request("Request body too large.")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def parse_json(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        raise bad_request(
            "We could not parse the JSON body of your request. (HINT: This likely means "
            "you aren't using your HTTP library correctly.)"
        ) from None
    if not isinstance(data, dict):
        raise bad_request("The request body must be a JSON object.")
    return data


async def send_json(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-request-id", request_id()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_error(send: Send, error: ApiError) -> None:
    await send_json(send, error.status, error.body(), error.headers)


class ClientConnection:
    """Watches for the client going away while the app is busy writing."""

    __slots__ = ("gone", "current", "_task")

    def __init__(self, receive: Receive) -> None:
        self.gone = False
        self.current: asyncio.Future[Any] | None = None
        self._task = asyncio.ensure_future(self._watch(receive))

    async def _watch(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.gone = True
                fut = self.current
                if fut is not None and not fut.done():
                    fut.set_result(None)
                return

    def close(self) -> None:
        self._task.cancel()


def _keepalive(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(True)


async def stream_log(
    send: Send, conn: ClientConnection, resp: SimResponse, pos: int, *, after: int
) -> bool:
    """Write the log from `pos` until the response finishes; False if the connection ended early
    (client gone or `sim.drop_after`)."""
    resp.attach()  # before any await: a finished response is packed once no reader is left
    try:
        return await _stream_log(send, conn, resp, pos, after=after)
    finally:
        resp.detach()


async def _stream_log(
    send: Send, conn: ClientConnection, resp: SimResponse, pos: int, *, after: int
) -> bool:
    faults = resp.faults
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream; charset=utf-8"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
                (b"x-request-id", request_id()),
            ],
        }
    )
    loop = asyncio.get_running_loop()
    keepalive = faults.keepalive_ms / 1000 if faults.keepalive_ms else None
    drop = (
        faults.drop_after if faults.drop_after is not None and after < faults.drop_after else None
    )
    duplicate = faults.duplicate
    complete = False
    while not conn.gone:
        chunk, seqs = resp.read(pos)
        if chunk:
            dropped = False
            if drop is not None and seqs[-1] >= drop:
                cut = bisect_right(seqs, drop)
                chunk = chunk[:cut]
                dropped = True
            pos += len(chunk)
            resp.consumed(pos)
            if chunk:
                body = b"".join([e + e for e in chunk] if duplicate else chunk)
                await send({"type": "http.response.body", "body": body, "more_body": True})
            if dropped:
                break
            continue
        if resp.finished:
            complete = True
            break
        fut = resp.waiter()
        conn.current = fut
        handle = loop.call_later(keepalive, _keepalive, fut) if keepalive else None
        fired = await fut  # type: ignore[func-returns-value]
        if handle is not None:
            handle.cancel()
        if fired is True and not conn.gone:
            await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
    if not conn.gone:
        end = trailer(faults.dialect) if complete else b""  # sim.dialect: `data: [DONE]` and the like
        await send({"type": "http.response.body", "body": end, "more_body": False})
    return complete

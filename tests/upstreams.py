"""A scripted provider on real loopback HTTP, for streams the simulator does not make: real captures
served byte for byte (whole, in 1-byte writes, or paced) or, in WebSocket mode, event by event as
frames; and failures before any stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import orjson


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/event-stream"
    chunk_size: int | None = None  # write the body in pieces of this size (None: at once)
    pause_s: float = 0.0  # between pieces
    pause_before: bytes | None = None  # ...or one pause, before the first piece that starts with this
    pause_before_s: float = 0.5
    then: Reply | None = None  # what later requests to the same route get (None: this reply again)
    echo: str = ""  # a request header whose value replaces `{echo}` in the body (an API that quotes it)


@dataclass
class ScriptedUpstream:
    replies: dict[str, Reply]  # by "POST /v1/responses", "GET /v1/responses/<id>" ... (prefix match)
    base: str = ""
    requests: list[tuple[str, bytes]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)  # each request's, names in lower case
    last_byte_at: float = 0.0

    def reply_for(self, line: str) -> Reply:
        for prefix, reply in self.replies.items():
            if line.startswith(prefix):
                if reply.then is not None:
                    self.replies[prefix] = reply.then
                return reply
        return Reply(404, orjson.dumps({"error": {"message": "no such route", "code": "not_found"}}),
                     "application/json")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            length = next((int(v) for k, _, v in (h.partition(":") for h in lines[1:])
                           if k.strip().lower() == "content-length"), 0)
            body = await reader.readexactly(length) if length else b""
            self.requests.append((f"{method} {target}", body))
            received = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:]) if k}
            self.headers.append(received)
            reply = self.reply_for(f"{method} {target}")
            if reply.echo:
                echoed = received.get(reply.echo.lower(), "").encode("latin-1")
                reply = replace(reply, body=reply.body.replace(b"{echo}", echoed))
            status_line = f"HTTP/1.1 {reply.status} X\r\n"
            headers = f"content-type: {reply.content_type}\r\nconnection: close\r\n\r\n"
            writer.write((status_line + headers).encode())
            await writer.drain()
            pieces = _pieces(reply)
            for piece in pieces:
                if reply.pause_before is not None and piece.startswith(reply.pause_before):
                    await asyncio.sleep(reply.pause_before_s)
                writer.write(piece)
                await writer.drain()
                if reply.pause_s:
                    await asyncio.sleep(reply.pause_s)
            self.last_byte_at = asyncio.get_running_loop().time()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def _pieces(reply: Reply) -> list[bytes]:
    body = reply.body
    if reply.pause_before is not None:  # SSE events as pieces, so the pause falls between two
        return [block + b"\n\n" for block in body.split(b"\n\n") if block.strip()]
    if reply.chunk_size is None:
        return [body]
    return [body[i:i + reply.chunk_size] for i in range(0, len(body), reply.chunk_size)]


@asynccontextmanager
async def scripted_upstream(replies: dict[str, Reply]) -> AsyncIterator[ScriptedUpstream]:
    upstream = ScriptedUpstream(replies)
    server = await asyncio.start_server(upstream.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    upstream.base = f"http://127.0.0.1:{port}/v1"
    try:
        yield upstream
    finally:
        server.close()
        await server.wait_closed()


def json_error(status: int, code: str, message: str) -> Reply:
    return Reply(status, orjson.dumps({"error": {"message": message, "type": "invalid_request_error",
                                                 "code": code, "param": None}}), "application/json")


@dataclass
class ScriptedWebSocket:
    """WebSocket mode's side of a scripted provider: each `response.create` is answered with the
    events of `payloads` (each one event's JSON, as SSE `data` carried it), echoing its stream_id."""

    payloads: list[str]
    base: str = ""
    creates: list[dict[str, object]] = field(default_factory=list)

    async def handle(self, connection: Any) -> None:
        async for message in connection:
            create = orjson.loads(message)
            self.creates.append(create)
            prefix = '{"stream_id":' + orjson.dumps(create.get("stream_id")).decode() + ","
            for payload in self.payloads:
                await connection.send(prefix + (payload[1:] if payload.startswith("{") else payload))


@asynccontextmanager
async def scripted_websocket(payloads: list[str]) -> AsyncIterator[ScriptedWebSocket]:
    """On real loopback; any plain HTTP request (a reconcile's GET) gets a 404."""
    from websockets.asyncio.server import serve

    upstream = ScriptedWebSocket(payloads)

    def plain_http(connection: Any, request: Any) -> Any:
        if request.headers.get("upgrade", "").lower() != "websocket":
            return connection.respond(404, "no such route\n")
        return None

    async with serve(upstream.handle, "127.0.0.1", 0, process_request=plain_http, compression=None,
                     max_size=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        upstream.base = f"http://127.0.0.1:{port}/v1"
        yield upstream

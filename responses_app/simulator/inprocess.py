"""Drive the simulator app in-process, without a server: for recording fixtures and quick checks."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from .app import SimulatorApp


async def request(
    app: SimulatorApp,
    method: str,
    path: str,
    payload: dict[str, Any] | None = None,
    query: bytes = b"",
) -> tuple[int, bytes]:
    """One request through the ASGI interface; the whole body once the app is done."""
    data = orjson.dumps(payload) if payload is not None else b""
    sent = False
    finished = asyncio.Event()
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": data, "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                finished.set()

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "query_string": query,
        "headers": [(b"content-type", b"application/json")],
    }
    await app(scope, receive, send)  # type: ignore[arg-type]
    finished.set()
    return status, b"".join(chunks)

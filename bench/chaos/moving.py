"""A viewer's socket across a stopping web process's `moving` (viewers/guard.py `move_sockets`),
kept as the page's livesocket.js keeps it: make before break."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

MOVING = '{"type":"moving"}'


class MovingSocket:
    """A viewer's socket kept as livesocket.js keeps it across a server's `moving`: a new socket is
    opened (`opener`: the socket, its first message, and what makes it the viewer's) beside the
    current one, which goes on being read until the new one's first message; the new one is then
    the socket and the old one is closed. A new socket that fails is dropped, the old one's close
    then reconnects as before; an old one that closes while the new one connects waits for it."""

    def __init__(self, ws: Any, opener: Any, viewer: Any) -> None:
        self.ws, self.opener, self.viewer = ws, opener, viewer
        self.reading: asyncio.Task[Any] | None = None  # the current socket's recv
        self.moving: asyncio.Task[tuple[Any, Any, Any]] | None = None  # the new socket, its first message, ...

    @property
    def close_code(self) -> int | None:
        return self.ws.close_code

    async def send(self, text: str) -> None:
        await self.ws.send(text)

    async def recv(self) -> Any:
        while True:
            if self.reading is None:
                self.reading = asyncio.ensure_future(self.ws.recv())
            waits: set[asyncio.Future[Any]] = {self.reading}
            if self.moving is not None:
                waits.add(self.moving)
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if self.moving in done:
                first = self._moved()
                if first is not None:
                    return first
                continue
            reading, self.reading = self.reading, None
            try:
                raw = reading.result()
            except Exception:
                if self.moving is None:
                    raise
                self.viewer.step("old socket closed while moving")
                await asyncio.wait({self.moving})
                first = self._moved()
                if first is None:
                    raise
                return first
            if raw == MOVING:
                if self.moving is None:
                    self.viewer.step("asked to move")
                    self.moving = asyncio.ensure_future(self.opener())
                continue
            return raw

    def _moved(self) -> Any:
        """The new socket's first message, once it is the socket; None if it failed."""
        moving, self.moving = self.moving, None
        assert moving is not None
        try:
            ws, first, switched = moving.result()
        except Exception as exc:
            self.viewer.step(f"new socket failed: {type(exc).__name__}: {exc}"[:80])
            return None
        old, self.ws = self.ws, ws
        switched()
        if self.reading is not None:
            self.reading.cancel()
            self.reading = None
        self.viewer.reconnects += 1
        self.viewer.step(f"moved to :{self.viewer.port}")
        asyncio.ensure_future(close_quietly(old))
        return first

    async def close(self) -> None:
        for task in (self.reading, self.moving):
            if task is not None:
                task.cancel()
        if self.moving is not None:
            with contextlib.suppress(BaseException):
                ws, _, _ = await self.moving
                await ws.close()
        self.reading = self.moving = None
        await close_quietly(self.ws)


async def listening(ports: list[int], first: int, opening: Any) -> tuple[int, Any]:
    """The slot and open socket of the first web process from slot `first` on that takes the
    connection, as a load balancer in front of them does: a refused connection (a process stopped
    or not started yet) goes to the next at once, not after the client's backoff."""
    for tried in range(len(ports)):
        slot = first + tried
        try:
            return slot, await opening(ports[slot % len(ports)])
        except ConnectionRefusedError:
            if tried == len(ports) - 1:
                raise
    raise AssertionError("no web process")


async def close_quietly(ws: Any) -> None:
    with contextlib.suppress(Exception):
        await ws.close()

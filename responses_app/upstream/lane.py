"""A lane: one response's frames on a shared upstream WebSocket (upstream/websocket.py), bounded.

The connection's reader routes each frame to its lane by `stream_id` (`lane_of`); the runner
iterates the lane for the events' JSON. A lane holds at most `lane_max_chars` of unread frames
(one frame always fits): while it is full the reader waits for its runner (`room`), and a lane
ended for being slow (`overflow`) reads as a drop. A first frame that refuses the request
(`refusal`) raises as an HTTP refusal would; one at the provider's connection limit, `Rotate`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

import orjson

from ..conf import app_settings
from .http import UpstreamHTTPError

LIMIT_CODE = "websocket_connection_limit_reached"
_END = object()
# A response's last event: its lane carries nothing more for it (looked for near the frame's start).
_TERMINALS = ('"type":"response.completed"', '"type":"response.failed"', '"type":"response.incomplete"',
              '"type":"response.cancelled"')


def lane_max_chars() -> int:
    """Characters of frames a lane holds unread before the connection's reader waits for it."""
    return int(app_settings.MAX_EVENT_BYTES)


class Rotate(Exception):
    """This connection reached its time limit before the request started: use another."""


def lane_of(frame: str, lanes: dict[str, Lane]) -> Lane | None:
    """The lane a frame belongs to, from its `"stream_id"` (ours: no escapes), without parsing the
    JSON a second time; only a value naming one of this connection's lanes counts."""
    start = 0
    while (key := frame.find('"stream_id"', start)) >= 0:
        quote = frame.find('"', frame.find(":", key + 11) + 1)
        end = frame.find('"', quote + 1)
        if quote < 0 or end < 0:
            return None
        lane = lanes.get(frame[quote + 1:end])
        if lane is not None:
            return lane
        start = end
    return None


def refusal(payload: dict[str, Any]) -> UpstreamHTTPError | Rotate | None:
    """A first frame that is WebSocket mode's answer to a refused request: an `error` with the
    HTTP status and no sequence number (an error during a response has one)."""
    if payload.get("type") != "error" or "sequence_number" in payload or not isinstance(payload.get("status"), int):
        return None
    raw_error = payload.get("error")
    error: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
    if error.get("code") == LIMIT_CODE:
        return Rotate()
    raw_headers = error.get("headers")
    headers: dict[str, Any] = raw_headers if isinstance(raw_headers, dict) else {}
    try:
        retry_after = float(headers["retry-after"]) if "retry-after" in headers else None
    except (TypeError, ValueError):
        retry_after = None
    body = {key: value for key, value in error.items() if key != "headers"}
    return UpstreamHTTPError(payload["status"], orjson.dumps({"error": body}), retry_after)


class Lane:
    """One stream's frames on a shared connection; iterate it for the events' JSON.

    Bounded: the connection's reader waits (`room`) while the frames not yet read hold
    `max_pending` characters or more (one frame always fits), so the provider is slowed through
    the socket rather than buffered without end; a lane that stays full past LANE_WAIT_S is ended
    for its response alone (`overflow`): the other lanes only wait that long once."""

    __slots__ = ("stream_id", "_frames", "_pending", "_max_pending", "_wake", "_room", "_first", "closed",
                 "overflowed")

    def __init__(self, stream_id: str, max_pending: int | None = None) -> None:
        self.stream_id = stream_id
        self._frames: deque[Any] = deque()
        self._pending = 0  # characters of the frames not read yet
        self._max_pending = lane_max_chars() if max_pending is None else max_pending
        self._wake: asyncio.Future[None] | None = None  # the runner waits for a frame
        self._room: asyncio.Future[None] | None = None  # the connection's reader waits for room
        self._first: str | None = None
        self.closed: tuple[int | None, str] | None = None  # the connection's close, if it came first
        self.overflowed = False  # ended because it was not read in time

    @property
    def full(self) -> bool:
        return self._pending >= self._max_pending

    def put(self, frame: str) -> None:
        self._frames.append(frame)
        self._pending += len(frame)
        self._notify()

    def end(self, code: int | None, reason: str) -> None:
        if self.closed is None:
            self.closed = (code, reason)
        self._frames.append(_END)
        self._notify()
        if self._room is not None and not self._room.done():
            self._room.set_result(None)  # nothing more goes in: the connection's reader goes on

    def overflow(self) -> None:
        """Not read in time: what it holds is read, then its stream ends without a terminal event
        (a drop: the runner reconciles over HTTP); later frames of its response are dropped."""
        self.overflowed = True
        self.end(None, "lane overflow")

    async def room(self, timeout: float) -> bool:
        """Wait until the runner read enough of the lane, at most `timeout` seconds; False when
        it stayed full."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                while self.full and self.closed is None:
                    self._room = loop.create_future()
                    await self._room
        except TimeoutError:
            return False
        finally:
            self._room = None
        return True

    def _notify(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _get(self) -> Any:
        frames = self._frames
        while not frames:
            self._wake = asyncio.get_running_loop().create_future()
            try:
                await self._wake
            finally:
                self._wake = None
        frame = frames.popleft()
        if frame is not _END:
            self._pending -= len(frame)
            room = self._room
            if room is not None and not room.done() and not self.full:
                room.set_result(None)
        return frame

    async def start(self) -> None:
        """Wait for the first frame: raise if it refuses the request; keep it for the reader."""
        frame = await self._get()
        if frame is _END:
            if self.closed is not None and self.closed[1] == LIMIT_CODE:
                raise Rotate()
            self._frames.append(_END)  # closed before any event: the reader sees a drop
            return
        if frame.startswith('{"type":"error"') or '"type":"error"' in frame[:64]:
            with suppress(orjson.JSONDecodeError):
                refused = refusal(orjson.loads(frame))
                if refused is not None:
                    raise refused
        self._first = frame

    def __aiter__(self) -> AsyncIterator[str]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[str]:
        frame: Any = self._first
        self._first = None
        if frame is None:
            frame = await self._get()
        while frame is not _END:
            yield frame
            head = frame[:160]
            if any(kind in head for kind in _TERMINALS):
                # The end of the response, as a closed SSE body is: what came with it is read, then
                # the stream ends (a terminal event held behind a gap that never fills is released).
                while self._frames:
                    frame = await self._get()
                    if frame is _END:
                        break
                    yield frame
                return
            frame = await self._get()
        self._frames.append(_END)  # the socket closed: the stream ends without a terminal event (a drop)

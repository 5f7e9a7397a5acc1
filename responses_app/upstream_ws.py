"""The Responses API's WebSocket mode as the relay's upstream (RELAY_UPSTREAM_TRANSPORT=websocket).

One connection per runner process (`ws(s)://…/v1/responses`, the `websockets` client; the
embedded simulator in-process, embedded.py), shared by every stream of the process: each
`create_stream` sends `response.create` (the POST body, without `stream` and `background`) on a
lane of its own (`stream_id`), and reads back that lane's events, one JSON per frame, which the
runner feeds to `Transcript.feed_event`. Tool rounds and later turns go over the same connection;
`previous_response_id` chains them across lanes. `retrieve` and `cancel` stay HTTP calls (the
inherited `Upstream`), so a dropped socket is reconciled as over SSE.

Outcomes, as the SSE clients give them: a connection that cannot be opened raises
`httpx.ConnectError` (nothing was sent), a handshake or a `response.create` refused with an HTTP
status raises `UpstreamHTTPError`, and a socket that closes mid-response just ends the lane's
frames (a drop: the runner reconciles). WebSocket mode has no background mode and no resume: a
request asking for background mode is POSTed over HTTP instead, and resumed there after a drop.

Bounded: frames of at most four events' bound (a larger one closes the connection), at most
MAX_QUEUE frames buffered by the client, and per lane at most an event's bound of unread frames;
the connection's reader waits for a full lane's runner at most LANE_WAIT_S, then ends that lane
alone. A fault in one response (an oversized or broken frame, an error event) stays in its lane.

The connection is rotated without losing a turn: once older than RELAY_UPSTREAM_WS_MAX_AGE_S it
takes no new lane (its streams finish on it, then it closes) and a new one opens; a
`response.create` refused with `websocket_connection_limit_reached`, or a connection closed for
that reason before the request's first event, is sent again on a new connection (the provider
started nothing).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, Protocol

import httpx
import orjson
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from .conf import app_settings
from .embedded import EMBEDDED_BASE_URL, EmbeddedClosed, EmbeddedRefused, EmbeddedWebSocket, simulator_app
from .upstream import EventFrames, Upstream, UpstreamHTTPError, base_url

logger = logging.getLogger(__name__)

LIMIT_CODE = "websocket_connection_limit_reached"
MAX_ROTATIONS = 3  # a response.create sent again on a fresh connection at most this often
_END = object()
# A response's last event: its lane carries nothing more for it (looked for near the frame's start).
_TERMINALS = ('"type":"response.completed"', '"type":"response.failed"', '"type":"response.incomplete"',
              '"type":"response.cancelled"')
_lane_numbers = itertools.count(1)
MAX_QUEUE = 4  # frames the websockets client buffers before it stops reading the socket
LANE_WAIT_S = 5.0  # how long the connection's reader waits for a full lane before ending it


def max_frame_bytes() -> int:
    """The largest frame read (a larger one closes the connection, 1009): four events' bound, so an
    oversized event reaches its lane and is skipped there."""
    return 4 * int(app_settings.MAX_EVENT_BYTES)


def lane_max_chars() -> int:
    """Characters of frames a lane holds unread before the connection's reader waits for it."""
    return int(app_settings.MAX_EVENT_BYTES)


def max_age_s() -> float:
    """How long a connection takes new streams: under the provider's 60 minutes by more than a
    request may last (RELAY_REQUEST_DEADLINE_S, 15 minutes by default), so none is cut."""
    return float(app_settings.UPSTREAM_WS_MAX_AGE_S)


class _Socket(Protocol):
    async def send(self, message: str) -> None: ...
    async def recv(self) -> str | bytes: ...
    async def close(self) -> None: ...


class _Rotate(Exception):
    """This connection reached its time limit before the request started: use another."""


def _ws_url(base: str) -> str:
    scheme, rest = base.split("://", 1)
    return ("wss" if scheme == "https" else "ws") + "://" + rest + "/responses"


def _lane_of(frame: str, lanes: dict[str, Lane]) -> Lane | None:
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


def _refusal(payload: dict[str, Any]) -> UpstreamHTTPError | _Rotate | None:
    """A first frame that is WebSocket mode's answer to a refused request: an `error` with the
    HTTP status and no sequence number (an error during a response has one)."""
    if payload.get("type") != "error" or "sequence_number" in payload or not isinstance(payload.get("status"), int):
        return None
    raw_error = payload.get("error")
    error: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
    if error.get("code") == LIMIT_CODE:
        return _Rotate()
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
                raise _Rotate()
            self._frames.append(_END)  # closed before any event: the reader sees a drop
            return
        if frame.startswith('{"type":"error"') or '"type":"error"' in frame[:64]:
            with suppress(orjson.JSONDecodeError):
                refused = _refusal(orjson.loads(frame))
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


class Connection:
    """One WebSocket and the lanes reading from it; a reader task routes every frame."""

    def __init__(self, socket: _Socket, opened: float) -> None:
        self.socket = socket
        self.opened = opened
        self.lanes: dict[str, Lane] = {}
        self.expired = False  # takes no new lane
        self.closed: tuple[int | None, str] | None = None
        self.orphans = 0  # frames of no open lane (a stopped stream's rest, connection-level errors)
        self.overflows = 0  # lanes ended because their runner did not read them in time
        self._reader = asyncio.get_running_loop().create_task(self._read(), name="upstream-ws-reader")

    async def _read(self) -> None:
        code: int | None = None
        reason = ""
        lanes = self.lanes
        try:
            while True:
                received = await self.socket.recv()
                frame = received if isinstance(received, str) else received.decode("utf-8", "replace")
                lane = _lane_of(frame, lanes)
                if lane is None:
                    self._orphan(frame)
                    continue
                if lane.full and not await lane.room(LANE_WAIT_S) and lane.closed is None:
                    # Its runner is stuck: end that response's lane alone, not every lane's wait.
                    lanes.pop(lane.stream_id, None)
                    lane.overflow()
                    self.overflows += 1
                    logger.warning("upstream websocket lane %s not read for %ss; ended for its response",
                                   lane.stream_id, LANE_WAIT_S)
                    continue
                if lane.closed is None:  # (its runner may have let it go meanwhile)
                    lane.put(frame)
        except ConnectionClosed as exc:
            close = exc.rcvd or exc.sent
            code, reason = (close.code, close.reason) if close is not None else (1006, "")
        except EmbeddedClosed as exc:
            code, reason = exc.code, exc.reason
        except (OSError, WebSocketException) as exc:
            code, reason = 1006, f"{type(exc).__name__}: {exc}"
        finally:
            self.closed = (code, reason)
            self.expired = True
            for lane in list(lanes.values()):
                lane.end(code, reason)

    def _orphan(self, frame: str) -> None:
        self.orphans += 1
        if LIMIT_CODE in frame:
            self.expired = True

    def open_lane(self) -> Lane:
        lane = Lane(f"relay-{next(_lane_numbers)}")
        self.lanes[lane.stream_id] = lane
        return lane

    async def close_lane(self, lane: Lane) -> None:
        self.lanes.pop(lane.stream_id, None)
        lane.end(None, "closed")  # a reader waiting for room in it goes on
        if self.expired and not self.lanes:
            await self.close()

    async def close(self) -> None:
        self.expired = True
        with suppress(Exception):
            await self.socket.close()
        self._reader.cancel()
        with suppress(asyncio.CancelledError):
            await self._reader


class WebSocketUpstream(Upstream):
    """`Upstream` with `create_stream` over WebSocket mode; everything else over HTTP."""

    resumable = True  # a background request goes over HTTP (below), and resumes there
    persistent = True  # kept open between requests: the hub does not close it when idle

    def __init__(self, *, base: str | None = None, api_key: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, max_age: float | None = None) -> None:
        super().__init__(base=base, api_key=api_key, transport=transport)
        self.max_age = max_age_s() if max_age is None else max_age
        self.connection: Connection | None = None
        self.connections = 0  # opened so far (tests and the benchmark read it)
        self._draining: set[Connection] = set()
        self._opening = asyncio.Lock()

    async def aclose(self) -> None:
        for conn in [*self._draining, *([self.connection] if self.connection else [])]:
            await conn.close()
        self.connection = None
        self._draining.clear()
        await super().aclose()

    @asynccontextmanager
    async def create_stream(self, body: dict[str, Any]) -> AsyncIterator[httpx.Response | EventFrames]:
        if body.get("background"):
            # WebSocket mode has no background mode: a request that asks for it (to survive a
            # dropped connection) is POSTed over HTTP, and resumed there after a drop.
            async with super().create_stream(body) as response:
                yield response
            return
        request = {key: value for key, value in body.items() if key not in ("stream", "background")}
        for attempt in range(MAX_ROTATIONS + 1):
            conn = await self._connection()
            lane = conn.open_lane()
            try:
                try:
                    await conn.socket.send(orjson.dumps({"type": "response.create", **request,
                                                         "stream_id": lane.stream_id}).decode())
                except (ConnectionClosed, EmbeddedClosed):
                    raise _Rotate() from None  # it closed while idle: the request never left
                await lane.start()
            except _Rotate:
                conn.expired = True
                await conn.close_lane(lane)
                if attempt == MAX_ROTATIONS:  # nothing started: as certain as a refused connection
                    raise httpx.ConnectError(f"the provider kept refusing new requests ({LIMIT_CODE})") from None
                logger.info("upstream websocket reached its time limit; sending again on a new connection")
                continue
            except BaseException:
                await conn.close_lane(lane)
                raise
            break
        try:
            yield lane
        finally:
            await conn.close_lane(lane)

    async def _connection(self) -> Connection:
        async with self._opening:
            conn = self.connection
            loop = asyncio.get_running_loop()
            if conn is not None and (conn.expired or loop.time() - conn.opened >= self.max_age):
                conn.expired = True
                self.connection = None
                if conn.lanes:
                    self._draining.add(conn)  # its streams finish on it; closed after the last
                else:
                    await conn.close()
            self._draining = {c for c in self._draining if c.closed is None and c.lanes}
            if self.connection is None:
                self.connection = Connection(await self._open_socket(), loop.time())
                self.connections += 1
            return self.connection

    async def _open_socket(self) -> _Socket:
        headers = {"authorization": self.client.headers["authorization"]} \
            if "authorization" in self.client.headers else {}
        if self.base == EMBEDDED_BASE_URL:
            try:
                return await EmbeddedWebSocket.connect(
                    simulator_app(), "/v1/responses",
                    [(key.encode(), value.encode()) for key, value in headers.items()])
            except EmbeddedRefused as exc:
                raise UpstreamHTTPError(exc.status, exc.body, None) from exc
        try:
            return await connect(
                _ws_url(self.base), additional_headers=headers, compression=None, open_timeout=10,
                # An oversized event reaches its own lane, where the core counts and skips it; only
                # one far past the limit ends the connection (every lane on it). At most MAX_QUEUE
                # frames wait in the client before it stops reading the socket (TCP backpressure).
                max_size=max_frame_bytes(), max_queue=MAX_QUEUE,
            )
        except InvalidStatus as exc:
            response = exc.response
            value = response.headers.get("retry-after")
            try:
                retry_after = float(value) if value else None
            except ValueError:
                retry_after = None
            raise UpstreamHTTPError(response.status_code, bytes(response.body or b""), retry_after) from exc
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}") from exc


def make_upstream() -> Upstream:
    """The process's upstream client for RELAY_UPSTREAM_TRANSPORT."""
    if app_settings.UPSTREAM_TRANSPORT == "websocket":
        return WebSocketUpstream()
    return Upstream()


def matches_settings(upstream: Upstream) -> bool:
    """Still the client the settings ask for (tests and a reloaded configuration change them)."""
    websocket = app_settings.UPSTREAM_TRANSPORT == "websocket"
    return upstream.base == base_url().rstrip("/") and isinstance(upstream, WebSocketUpstream) == websocket

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
MAX_QUEUE frames buffered by the client, and per lane (upstream/lane.py) at most an event's bound of
unread frames; the connection's reader waits for a full lane's runner at most LANE_WAIT_S, then
ends that lane alone; frames nobody reads past `orphan_max_chars` close the connection once no lane
is open. A fault in one response (an oversized or broken frame, an error event) stays in its lane.

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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import orjson
from django.core.exceptions import ImproperlyConfigured

from ..conf import app_settings
from ..providers import Provider
from .embedded import EMBEDDED_BASE_URL, EmbeddedClosed, EmbeddedRefused, EmbeddedWebSocket, simulator_app
from .http import EventFrames, Upstream, UpstreamHTTPError, base_url
from .lane import LIMIT_CODE, Lane, Rotate, lane_of

if TYPE_CHECKING:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
else:
    try:  # the `server` extra: a bare install imports this module, and asks for it only when used
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
    except ImportError:
        connect = None

        class ConnectionClosed(Exception):  # never raised: no websockets socket is ever opened
            rcvd = sent = None

        InvalidStatus = WebSocketException = ConnectionClosed

MISSING = "pip install 'responses-relay[server]', or use transport 'sse' (the embedded simulator needs neither)."


def client_installed() -> bool:
    return connect is not None


def needs_client(base: str) -> bool:
    """A WebSocket-mode upstream at `base` opens real sockets (the embedded simulator needs none)."""
    return base.rstrip("/") != EMBEDDED_BASE_URL

logger = logging.getLogger(__name__)

MAX_ROTATIONS = 3  # a response.create sent again on a fresh connection at most this often
_lane_numbers = itertools.count(1)
MAX_QUEUE = 4  # frames the websockets client buffers before it stops reading the socket
LANE_WAIT_S = 5.0  # how long the connection's reader waits for a full lane before ending it


def max_frame_bytes() -> int:
    """The largest frame read (a larger one closes the connection, 1009): four events' bound, so an
    oversized event reaches its lane and is skipped there."""
    return 4 * int(app_settings.MAX_EVENT_BYTES)


def orphan_max_chars() -> int:  # frames of no open lane a connection takes before it is closed
    return 8 * int(app_settings.MAX_EVENT_BYTES)


def max_age_s() -> float:
    """How long a connection takes new streams: under the provider's 60 minutes by more than a
    request may last (RELAY_REQUEST_DEADLINE_S, 15 minutes by default), so none is cut."""
    return float(app_settings.UPSTREAM_WS_MAX_AGE_S)


class _Socket(Protocol):
    async def send(self, message: str) -> None: ...
    async def recv(self) -> str | bytes: ...
    async def close(self) -> None: ...


def _ws_url(base: str) -> str:
    scheme, rest = base.split("://", 1)
    return ("wss" if scheme == "https" else "ws") + "://" + rest + "/responses"


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
        self.orphan_chars = 0
        self._reader = asyncio.get_running_loop().create_task(self._read(), name="upstream-ws-reader")

    async def _read(self) -> None:
        code: int | None = None
        reason = ""
        lanes = self.lanes
        try:
            while True:
                received = await self.socket.recv()
                frame = received if isinstance(received, str) else received.decode("utf-8", "replace")
                lane = lane_of(frame, lanes)
                if lane is None:
                    if self._orphan(frame):
                        logger.warning("upstream websocket: %s characters nobody reads; closed", self.orphan_chars)
                        with suppress(Exception):
                            await self.socket.close()
                        code, reason = 1000, "orphan frames"
                        break
                    continue
                if lane.full and not await lane.room(LANE_WAIT_S) and lane.closed is None:
                    # Its runner is stuck: end that response's lane alone, not every lane's wait.
                    lanes.pop(lane.stream_id, None)
                    lane.overflow()
                    self.overflows += 1
                    logger.warning("upstream websocket lane %s not read for %ss; ended", lane.stream_id, LANE_WAIT_S)
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

    def _orphan(self, frame: str) -> bool:
        """Count a frame of no open lane. Past `orphan_max_chars` of them (the rest of responses
        nobody reads: WebSocket mode cannot cancel one) the connection takes no new lane, and is
        closed once none is open (True: now), which ends them."""
        self.orphans += 1
        self.orphan_chars += len(frame)
        over = self.orphan_chars > orphan_max_chars()
        self.expired = self.expired or over or LIMIT_CODE in frame
        return over and not self.lanes

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
                 transport: httpx.AsyncBaseTransport | None = None, max_age: float | None = None,
                 provider: Provider | None = None) -> None:
        super().__init__(base=base, api_key=api_key, transport=transport, provider=provider)
        if needs_client(self.base) and not client_installed():
            raise ImproperlyConfigured(f"WebSocket mode needs the websockets package: {MISSING}")
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
                    raise Rotate() from None  # it closed while idle: the request never left
                await lane.start()
            except Rotate:
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


def make_upstream(provider: Provider | None = None) -> Upstream:
    """The process's upstream client for a provider (by default the implicit one: the
    RELAY_UPSTREAM_* settings), over its transport."""
    if provider is None:
        if app_settings.UPSTREAM_TRANSPORT == "websocket":
            return WebSocketUpstream()
        return Upstream()
    return WebSocketUpstream(provider=provider) if provider.websocket else Upstream(provider=provider)


def matches_settings(upstream: Upstream, provider: Provider | None = None) -> bool:
    """Still the client the settings ask for (tests and a reloaded configuration change them)."""
    if provider is not None:
        return upstream.provider == provider
    websocket = app_settings.UPSTREAM_TRANSPORT == "websocket"
    return upstream.base == base_url().rstrip("/") and isinstance(upstream, WebSocketUpstream) == websocket

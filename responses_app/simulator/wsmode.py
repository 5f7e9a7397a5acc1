"""WebSocket mode: `ws(s)://…/v1/responses`, one persistent connection, many responses.

The client sends `{"type": "response.create", ...}` with the body of `POST /v1/responses`
(`stream` is implicit; `background` is refused); the server sends the same `response.*` events,
one JSON object per text frame, no SSE framing. Requests with the same `stream_id` (a lane) run
one after another, in order; lanes run side by side, and every event of a lane's response echoes
its `stream_id`. A request refused before any stream (a 4xx/5xx over HTTP) is one `error` event
with the HTTP `status` and no `sequence_number`; the connection stays open.

What the connection alone knows: a response created with `store: false` is kept, once it ended,
only in this connection's cache (the latest of each of its last 64 lanes), so no other connection
can continue from it (`previous_response_not_found`). A connection lives at most `max_age_s` (the API's 60
minutes; `sim.ws_max_age_s` on a `response.create` sets it for that connection): past it every
`response.create` gets `websocket_connection_limit_reached`, responses in flight finish, and the
server closes the connection (reason `websocket_connection_limit_reached`) once none is left.

Faults are the SSE path's (faults.py) with three differences: `sim.drop_after` closes the whole
connection (code 1011), so every response in flight on it is cut and, being foreground, cancelled;
`sim.keepalive_ms` does nothing (the WebSocket layer pings on its own); there is no resume, so
`sim.resume_max_age_s` does not apply.
"""

from __future__ import annotations

import asyncio
import contextlib
from bisect import bisect_right
from typing import Any

import orjson

from .api_errors import ApiError, bad_request
from .asgi_io import Receive, Scope, Send, sse_data
from .auth import check_authorization
from .creation import request_faults, start_response
from .store import SimResponse, Store

WS_MAX_AGE_S = 3600.0  # the API's limit on one connection
LIMIT_CODE = "websocket_connection_limit_reached"
DROP_CLOSE_CODE = 1011
CACHE_LANES = 64  # store: false responses a connection keeps: the latest of this many lanes


def error_event(error: ApiError, stream_id: str | None) -> str:
    """A refusal before any stream, as WebSocket mode sends it: the HTTP status beside the body."""
    payload: dict[str, Any] = {"type": "error", "status": error.status,
                               "error": orjson.loads(error.body())["error"]}
    if error.headers:
        payload["error"]["headers"] = {k.decode(): v.decode() for k, v in error.headers}
    if stream_id is not None:
        payload["stream_id"] = stream_id
    return orjson.dumps(payload).decode()


def limit_error() -> ApiError:
    return bad_request("Responses websocket connection limit reached (60 minutes). Create a new websocket "
                       "connection to continue.", code=LIMIT_CODE)


async def reject(scope: Scope, send: Send, error: ApiError) -> None:
    """Refuse the handshake with the API's HTTP answer where the server can send one."""
    if "websocket.http.response" in (scope.get("extensions") or {}):
        headers = [(b"content-type", b"application/json"), *error.headers]
        await send({"type": "websocket.http.response.start", "status": error.status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": error.body()})
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": error.message[:120]})


class Session:
    """One accepted connection: its lanes, its cache and its age."""

    def __init__(self, store: Store, send: Send, *, max_age_s: float) -> None:
        self.store = store
        self._send = send
        self.loop = asyncio.get_running_loop()
        self.opened = self.loop.time()
        self.max_age_s = max_age_s
        self.lanes: dict[str | None, asyncio.Queue[dict[str, Any]]] = {}
        self.workers: set[asyncio.Task[None]] = set()
        self.busy = 0  # responses being created or streamed
        self.live: set[SimResponse] = set()
        self.cache: dict[str | None, SimResponse] = {}  # store: false responses, the latest per lane
        self.closed = asyncio.Event()
        self._limit_timer: asyncio.TimerHandle | None = None
        self._arm_limit()

    # --- the connection -------------------------------------------------------------------

    async def run(self, receive: Receive) -> None:
        try:
            while not self.closed.is_set():
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    break
                if message["type"] == "websocket.receive":
                    await self._client_event(message.get("text") or (message.get("bytes") or b"").decode())
        finally:
            self.closed.set()
            if self._limit_timer is not None:
                self._limit_timer.cancel()
            for task in self.workers:
                task.cancel()
            for resp in list(self.live):
                resp.cancel()  # a foreground response dies with its connection
            await asyncio.gather(*self.workers, return_exceptions=True)

    async def send(self, text: str) -> None:
        if not self.closed.is_set():
            await self._send({"type": "websocket.send", "text": text})

    async def close(self, code: int, reason: str) -> None:
        if not self.closed.is_set():
            self.closed.set()
            for resp in list(self.live):
                resp.cancel()  # a foreground response dies with its connection
            with contextlib.suppress(Exception):  # the client may be gone already
                await self._send({"type": "websocket.close", "code": code, "reason": reason})

    # --- the age limit --------------------------------------------------------------------

    @property
    def expired(self) -> bool:
        return self.loop.time() - self.opened >= self.max_age_s

    def _arm_limit(self) -> None:
        if self._limit_timer is not None:
            self._limit_timer.cancel()
        self._limit_timer = self.loop.call_at(self.opened + self.max_age_s, self._limit_reached)

    def _limit_reached(self) -> None:
        self._limit_timer = None
        if not self.busy:
            self.loop.create_task(self._close_at_limit())

    async def _close_at_limit(self) -> None:
        await self.send(error_event(limit_error(), None))
        await self.close(1000, LIMIT_CODE)

    # --- client events --------------------------------------------------------------------

    async def _client_event(self, text: str) -> None:
        try:
            event = orjson.loads(text)
        except orjson.JSONDecodeError:
            await self.send(error_event(bad_request("We could not parse the JSON of your event."), None))
            return
        if not isinstance(event, dict):
            await self.send(error_event(bad_request("An event must be a JSON object."), None))
            return
        stream_id = event.get("stream_id")
        lane = stream_id if isinstance(stream_id, str) else None
        if event.get("type") != "response.create":
            await self.send(error_event(bad_request(
                f"Invalid event type {event.get('type')!r}: this server accepts 'response.create'.",
                param="type"), lane))
            return
        queue = self.lanes.get(lane)
        if queue is None:
            queue = self.lanes[lane] = asyncio.Queue()
            worker = self.loop.create_task(self._lane(lane, queue))
            self.workers.add(worker)
            worker.add_done_callback(self.workers.discard)
        self.busy += 1  # counted from arrival: the limit never closes on a queued request
        queue.put_nowait(event)

    async def _lane(self, lane: str | None, queue: asyncio.Queue[dict[str, Any]]) -> None:
        while True:
            event = await queue.get()
            try:
                await self._create(lane, event)
            finally:
                self.busy -= 1
                if queue.empty():  # an idle lane keeps no task (a client may use a lane per request)
                    del self.lanes[lane]
                if not self.busy and self.expired and not self.closed.is_set():
                    await self._close_at_limit()
            if lane not in self.lanes:
                return

    async def _create(self, lane: str | None, event: dict[str, Any]) -> None:
        request = {k: v for k, v in event.items() if k not in ("type", "stream_id", "stream")}
        try:
            _, faults = request_faults(request)
            if faults.ws_max_age_s is not None:
                self.max_age_s = faults.ws_max_age_s
                self._arm_limit()
            if self.expired:
                raise limit_error()
            resp = await start_response(self.store, request, lookup=self._lookup, background_allowed=False)
        except ApiError as error:
            await self.send(error_event(error, lane))
            return
        self.live.add(resp)
        try:
            await self._stream(resp, lane)
        finally:
            self.live.discard(resp)
            if request.get("store") is False and resp.finished:
                self.store.discard(resp.id)
                self.cache.pop(lane, None)
                self.cache[lane] = resp
                if len(self.cache) > CACHE_LANES:
                    del self.cache[next(iter(self.cache))]  # the lane that ended longest ago

    def _lookup(self, response_id: str) -> SimResponse | None:
        for resp in self.cache.values():
            if resp.id == response_id:
                return resp
        return self.store.get(response_id)

    async def _stream(self, resp: SimResponse, lane: str | None) -> None:
        faults = resp.faults
        drop = faults.drop_after
        copies = 2 if faults.duplicate else 1
        # Every frame of the lane names it, malformed ones too (first, so a broken tail keeps it).
        prefix = b'{"stream_id":' + orjson.dumps(lane) + b"," if lane is not None else b"{"
        pos = resp.position_after(-1)
        resp.attach()  # before any await: a finished response is packed once no reader is left
        try:
            await self._read(resp, pos, prefix, drop, copies)
        finally:
            resp.detach()

    async def _read(self, resp: SimResponse, pos: int, prefix: bytes, drop: int | None,
                    copies: int) -> None:
        while not self.closed.is_set():
            chunk, seqs = resp.read(pos)
            if chunk:
                dropped = drop is not None and seqs[-1] >= drop
                if drop is not None and dropped:
                    chunk = chunk[: bisect_right(seqs, drop)]
                pos += len(chunk)
                resp.consumed(pos)
                for entry in chunk:  # b"event: ...\ndata: {...}\n\n"
                    text = (prefix + sse_data(entry)[1:]).decode()
                    for _ in range(copies):
                        await self.send(text)
                if dropped:
                    await self.close(DROP_CLOSE_CODE, "sim.drop_after")
                    return
                continue
            if resp.finished:
                return
            await resp.waiter()


async def serve(scope: Scope, receive: Receive, send: Send, *, store: Store, api_key: str | None,
                path: list[str], max_age_s: float) -> None:
    """A WebSocket connection to the simulator: the handshake, then a Session."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    try:
        if api_key is not None:
            check_authorization(scope, api_key)
        if path != ["responses"]:
            raise ApiError(404, f"Invalid URL (GET /v1/{'/'.join(path)})", code="unknown_url")
    except ApiError as error:
        await reject(scope, send, error)
        return
    await send({"type": "websocket.accept"})
    await Session(store, send, max_age_s=max_age_s).run(receive)

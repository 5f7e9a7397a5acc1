"""The relay benchmark's websocket viewers: one receive loop per process, no task per socket.

Each load process (`python -m bench.relay --role loadpart`, started by bench/relay/load.py) drives
its share of the step's streams. Its websockets are plain asyncio protocols
(`loop.create_connection`) around `websockets`' sans-I/O client (`ClientProtocol`): bytes arrive in
`data_received`, are parsed there and handled there, in one callback per read on the process's one
(uvloop) event loop. The previous viewers (bench/relay/tasks.py) ran a `websockets.asyncio`
connection per socket (a reader task, a queue and an `await recv()` per message), so at high
stream counts the load process's own loop lag was part of what it measured.

The viewers' logic is unchanged: ours tracks revisions, asks for a snapshot on a gap (as chat.js
does) and records receipt - emit of each patch's stamped deltas; naive counts sequence gaps. At the
end each of ours sends the explicit Stop and waits (bounded) for `terminal`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any, cast

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.typing import BytesLike
from websockets.uri import parse_uri

from bench.harness import cpu_seconds
from bench.stamps import STAMP


class Window:
    """The measured window's wall-clock bounds and what the viewers received in it."""

    def __init__(self) -> None:
        self.start = float("inf")
        self.end = float("inf")
        self.newest: list[float] = []  # ms, per message: receipt - emit of its newest delta
        self.oldest: list[float] = []  # ms, per message: receipt - emit of its oldest delta
        self.at: list[float] = []  # per message: its receipt time (wall clock)
        self.messages = 0
        self.deltas = 0
        self.lost = 0
        self.resyncs = 0

    def sequence(self, now: float, last_seq: int | None, message: dict[str, Any]) -> int:
        """A naive or bare relay's frame: counts the deltas missing before it (in the window) and
        returns its last sequence number. A bare relay's frame carries several deltas: `first`."""
        seq: int = message["seq"]
        first = message.get("first", seq)
        if self.start <= now < self.end and last_seq is not None and first > last_seq + 1:
            self.lost += first - last_seq - 1
        return seq

    def record(self, now: float, stamps: list[float]) -> None:
        if stamps:
            self.messages += 1
            self.deltas += len(stamps)
            self.newest.append((now - max(stamps)) * 1000)
            self.oldest.append((now - min(stamps)) * 1000)
            self.at.append(now)


class Viewer(asyncio.Protocol):
    """One websocket, sans-I/O: frames are parsed and handled in `data_received`."""

    def __init__(self, url: str, headers: dict[str, str], origin: str | None,
                 on_message: Callable[[Viewer, float, bytes], None]) -> None:
        self.ws = ClientProtocol(parse_uri(url), origin=origin, max_size=None)  # type: ignore[arg-type]
        self.request = self.ws.connect()
        for k, v in headers.items():
            self.request.headers[k] = v
        self.on_message = on_message
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.terminal: asyncio.Future[None] = loop.create_future()
        self._fragments: list[BytesLike] = []
        # state the handler keeps
        self.index = -1
        self.flowing = False
        self.revision: int | None = None
        self.last_seq: int | None = None
        self.t_connect = 0.0  # wall clock: when the TCP connect began
        self.first_view: float | None = None  # s, from then to the first snapshot (ours) or message

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.ws.send_request(self.request)
        self._flush()

    def _flush(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            data = self.ws.data_to_send()
            if data:
                chunks = [d for d in data if d]
                if chunks:
                    self.transport.write(b"".join(chunks))
                if not data[-1] and self.transport.can_write_eof():  # the protocol asks to close
                    self.transport.write_eof()

    def data_received(self, data: bytes) -> None:
        now = time.time()
        self.ws.receive_data(data)
        for event in self.ws.events_received():
            if isinstance(event, Response):
                if self.ws.handshake_exc is not None:
                    if not self.opened.done():
                        self.opened.set_exception(self.ws.handshake_exc)
                elif not self.opened.done():
                    self.opened.set_result(None)
                continue
            if isinstance(event, Frame) and event.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
                if not event.fin:
                    self._fragments.append(event.data)
                    continue
                payload = cast(bytes, event.data)  # a received frame's payload is bytes
                if self._fragments:
                    payload = b"".join([*self._fragments, payload])
                    self._fragments.clear()
                if not self.terminal.done() and b'"type":"terminal"' in payload:
                    self.terminal.set_result(None)
                self.on_message(self, now, payload)
        self._flush()

    def send(self, text: str) -> None:
        self.ws.send_text(text.encode())
        self._flush()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.send_close()
            self._flush()
        if self.transport is not None:
            self.transport.close()

    def eof_received(self) -> bool | None:
        self.ws.receive_eof()
        self._flush()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        for fut in (self.opened, self.terminal):
            if not fut.done():
                fut.set_exception(exc or ConnectionError("closed"))
                fut.exception()  # retrieved: nobody may be waiting
        if not self.closed.done():
            self.closed.set_result(None)


async def open_viewer(port: int, path: str, on_message: Callable[[Viewer, float, bytes], None],
                      headers: dict[str, str] | None = None, origin: str | None = None) -> Viewer:
    loop = asyncio.get_running_loop()
    t_connect = time.time()

    def made() -> Viewer:  # stamped here: its first message may be handled before create_connection returns
        v = Viewer(f"ws://127.0.0.1:{port}{path}", headers or {}, origin, on_message)
        v.t_connect = t_connect
        return v

    _, viewer = await loop.create_connection(made, "127.0.0.1", port)
    async with asyncio.timeout(30):
        await viewer.opened
    return viewer


def lag_sampler(stats: dict[str, Any], period: float = 0.01) -> asyncio.Task[None]:
    """This process's own loop lag, every `period` over the window (so its share of the lag is known)."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        lags = stats.setdefault("loop_lag_ms", [])
        while True:
            t = loop.time()
            await asyncio.sleep(period)
            lags.append((loop.time() - t - period) * 1000)

    return asyncio.get_running_loop().create_task(run())


async def load(cfg: dict[str, Any]) -> dict[str, Any]:
    """Drive streams `cfg["first"]`..+`cfg["streams"]`; the window starts at `cfg["start_at"]` (wall clock,
    set by the orchestrator for every load process alike) and lasts `cfg["window"]`."""
    import httpx
    import orjson

    from responses_app.streaming.wire import PROTOCOL, appended, decode

    n, first = cfg["streams"], cfg.get("first", 0)
    win = Window()
    errors: list[str] = []
    ready: list[int] = []
    gate = asyncio.Semaphore(cfg.get("ramp_concurrency", 16))
    port = cfg["port"]
    findall = STAMP.findall
    viewers: list[Viewer] = []
    paths: list[str] = []  # every stream's socket path (ours)

    def on_ours(v: Viewer, now: float, raw: bytes) -> None:
        try:
            message = decode(raw)
            kind = message.get("type")
            if kind == "snapshot":
                v.revision = message["revision"]
                if v.first_view is None:
                    v.first_view = now - v.t_connect
                return
            if kind != "patch":
                return
            measuring = win.start <= now < win.end
            if v.revision is not None and message["base"] != v.revision:
                if message["revision"] <= v.revision:
                    return  # stale
                if measuring:
                    win.lost += message["base"] - v.revision
                    win.resyncs += 1
                v.send('{"type":"snapshot"}')  # what chat.js does on a gap
            v.revision = message["revision"]
            stamps = [float(s) for text in appended(message["ops"]) for s in findall(text)]
            if stamps and not v.flowing:
                v.flowing = True
                if v.index >= 0:
                    ready.append(v.index)
            if measuring:
                win.record(now, stamps)
        except Exception as exc:
            errors.append(f"recv: {type(exc).__name__}: {exc}"[:200])

    def on_naive(v: Viewer, now: float, raw: bytes) -> None:
        try:
            message = orjson.loads(raw)
            v.last_seq = win.sequence(now, v.last_seq, message)
            if v.first_view is None:
                v.first_view = now - v.t_connect
            if not v.flowing:
                v.flowing = True
                ready.append(v.index)
            if win.start <= now < win.end:
                win.record(now, [float(s) for s in findall(message["delta"])])
        except Exception as exc:
            errors.append(f"recv: {type(exc).__name__}: {exc}"[:200])

    token = "x" * 32
    http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60,
                             cookies={"sessionid": cfg.get("session", ""), "csrftoken": token},
                             headers={"X-CSRFToken": token}, limits=httpx.Limits(max_connections=32))

    async def setup(i: int) -> None:
        async with gate:
            try:
                if cfg["target"] == "ours":
                    metadata = {"sim.tokens_per_s": str(cfg["tokens_per_s"]), "sim.tokens": str(cfg["tokens"]),
                                "sim.seed": str(cfg["seed"] + i), "sim.stamp": "true"}
                    created = await http.post("/api/requests", json={
                        "input": "Tell me something long.", "model": "sim-long",
                        "client_request_id": uuid.uuid4().hex, "background": cfg["background"],
                        "metadata": metadata})
                    created.raise_for_status()
                    path = f"/ws/requests/{created.json()['id']}/?v={PROTOCOL}"
                    paths.append(path)
                    for k in range(cfg.get("viewers", 1)):
                        v = await open_viewer(port, path, on_ours, {"Cookie": f"sessionid={cfg['session']}"},
                                              origin=f"http://127.0.0.1:{port}")
                        v.index = i if k == 0 else -1  # the first viewer's flow marks the stream as flowing
                        v.flowing = k > 0
                        viewers.append(v)
                else:
                    query = (f"tokens_per_s={cfg['tokens_per_s']}&tokens={cfg['tokens']}&seed={cfg['seed'] + i}"
                             "&stamp=1")
                    v = await open_viewer(port, f"/ws/naive/?{query}", on_naive)
                    v.index = i
                    viewers.append(v)
            except Exception as exc:
                errors.append(f"setup: {type(exc).__name__}: {exc}"[:200])

    t_ramp = time.time()
    setups = [asyncio.create_task(setup(i)) for i in range(first, first + n)]
    deadline = time.time() + cfg.get("ramp_timeout", 90)
    while len(ready) + len([e for e in errors if e.startswith("setup")]) < n and time.time() < deadline:
        await asyncio.sleep(0.05)
    ramp = time.time() - t_ramp
    burst = await _burst(port, paths, cfg) if cfg.get("burst") and cfg["target"] == "ours" else {}
    # The window: from the start the coordinator sends every load process alike, once all are ramped up
    # (bench/relay/load.py); run alone, after this process's own warm-up.
    start_at = time.time() + cfg["warmup"]
    if cfg.get("coordinated"):
        print(orjson.dumps({"ready": len(ready), "ramp_s": time.time() - t_ramp}).decode(), flush=True)
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        start_at = float(line)
    win.start = start_at
    win.start = max(win.start, time.time())
    win.end = win.start + cfg["window"]
    await asyncio.sleep(win.start - time.time())
    stats: dict[str, Any] = {}
    sampler = lag_sampler(stats)
    cpu0 = cpu_seconds(os.getpid())
    await asyncio.sleep(max(0.0, win.end - time.time()))
    elapsed = time.time() - win.start
    cpu = (cpu_seconds(os.getpid()) - cpu0) / elapsed
    sampler.cancel()
    lags = sorted(stats.get("loop_lag_ms", []))
    # The explicit Stop, so the next step starts clean; then wait (bounded) for `terminal`.
    if cfg["target"] == "ours":
        for v in viewers:
            with contextlib.suppress(Exception):
                v.send('{"type":"cancel"}')
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(15):
                await asyncio.gather(*(v.terminal for v in viewers), return_exceptions=True)
    for v in viewers:
        v.close()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(5):
            await asyncio.gather(*(v.closed for v in viewers), *setups, return_exceptions=True)
    await http.aclose()
    return {
        "streams": n, "connected": len(ready), "ramp_s": ramp, "window_s": elapsed, "start": win.start,
        "messages": win.messages, "deltas": win.deltas, "lost": win.lost, "resyncs": win.resyncs,
        "newest_ms": win.newest, "oldest_ms": win.oldest, "at": win.at, "cpu": cpu,
        # Each socket, from its connect to its first view (the snapshot; naive: its first message), s.
        "first_view_s": [v.first_view for v in viewers if v.first_view is not None],
        "no_first_view": sum(v.first_view is None for v in viewers),
        "loop_lag_ms": {"p50": lags[len(lags) // 2] if lags else float("nan"),
                        "p99": lags[int(len(lags) * 0.99)] if lags else float("nan"),
                        "max": lags[-1] if lags else float("nan")},
        "errors": errors[:5], "error_count": len(errors), "burst": burst,
    }


async def _burst(port: int, paths: list[str], cfg: dict[str, Any]) -> dict[str, Any]:
    """A burst of connects with the streams running: one more socket to each stream, all opened at
    once (as every tab reconnecting after a blip would), each closed once it has its first view.
    Returns each one's connect to first view (s), and how many got none within 30 s."""
    from responses_app.streaming.wire import decode

    def on_burst(v: Viewer, now: float, raw: bytes) -> None:
        if v.first_view is None and decode(raw).get("type") == "snapshot":
            v.first_view = now - v.t_connect
            if not v.terminal.done():
                v.terminal.set_result(None)  # here: its first view came

    headers = {"Cookie": f"sessionid={cfg['session']}"}
    opened = await asyncio.gather(*(open_viewer(port, path, on_burst, headers, origin=f"http://127.0.0.1:{port}")
                                    for path in paths), return_exceptions=True)
    tabs = [v for v in opened if isinstance(v, Viewer)]
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(30):
            await asyncio.gather(*(v.terminal for v in tabs), return_exceptions=True)
    for v in tabs:
        v.close()
    return {"first_view_s": [v.first_view for v in tabs if v.first_view is not None],
            "failed": len(opened) - len(tabs) + sum(v.first_view is None for v in tabs)}


def run(cfg: dict[str, Any]) -> dict[str, Any]:
    import uvloop

    result = uvloop.run(load(cfg))
    if cfg.get("out"):
        from pathlib import Path

        Path(cfg["out"]).write_text(orjson_dumps(result))
        return {"out": cfg["out"]}
    return result


def orjson_dumps(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()

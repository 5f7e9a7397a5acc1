"""The relay benchmark's previous load generator (`--loadgen tasks`): a websockets.asyncio
connection per viewer, each with its own receive loop, in the coordinator's own process.

It is still what the py-spy profile of the CPU section runs with (`--profile`). Its viewers keep
the same rules as bench/relay/loadgen.py's: ours tracks revisions and asks for a snapshot on a gap
(as chat.js does), naive counts sequence gaps; each records receipt - emit of the stamped deltas
it gets in the measured window.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench.harness import PY, cpu_seconds, main_thread_cpu, pct, run_delay
from bench.relay.loadgen import Window, lag_sampler
from bench.stamps import STAMP


async def _received(ws: Any, win: Window) -> AsyncIterator[tuple[float, str | bytes]]:
    """(receipt time, message) from a websocket until the measurement window ends."""
    while (remaining := win.end - time.time()) > 0:
        try:
            async with asyncio.timeout(min(remaining, 5)):  # no task per message, unlike wait_for
                raw = await ws.recv()
        except TimeoutError:
            continue
        yield time.time(), raw


async def _viewer_ours(cfg: dict[str, Any], i: int, win: Window, http: Any, gate: asyncio.Semaphore,
                       ready: list[int], errors: list[str]) -> None:
    from websockets.asyncio.client import connect
    from websockets.typing import Origin

    from responses_app.streaming.wire import PROTOCOL

    port, session = cfg["port"], cfg["session"]
    metadata = {"sim.tokens_per_s": str(cfg["tokens_per_s"]), "sim.tokens": str(cfg["tokens"]),
                "sim.seed": str(cfg["seed"] + i), "sim.stamp": "true"}
    async with gate:
        try:
            created = await http.post("/api/requests", json={
                "input": "Tell me something long.", "model": "sim-long", "client_request_id": uuid.uuid4().hex,
                "background": cfg["background"], "metadata": metadata})
            created.raise_for_status()
            request_id = created.json()["id"]
            sockets = [await connect(f"ws://127.0.0.1:{port}/ws/requests/{request_id}/?v={PROTOCOL}",
                                     origin=Origin(f"http://127.0.0.1:{port}"), additional_headers={
                                         "Cookie": f"sessionid={session}"}, compression=None, proxy=None,
                                     open_timeout=30, ping_interval=None)
                       for _ in range(cfg.get("viewers", 1))]
        except Exception as exc:
            errors.append(f"setup: {type(exc).__name__}: {exc}"[:200])
            return
    # Every viewer of the request counts; the first one's flow marks the stream as flowing.
    await asyncio.gather(*(_watch_ours(ws, i if k == 0 else -1, win, ready, errors)
                           for k, ws in enumerate(sockets)))


async def _watch_ours(ws: Any, i: int, win: Window, ready: list[int], errors: list[str]) -> None:
    from responses_app.streaming.wire import appended, decode

    flowing = i < 0
    revision: int | None = None
    loads = decode  # patches arrive in the wire's form (streaming/wire.py)
    findall = STAMP.findall
    try:
        async for now, raw in _received(ws, win):
            message = loads(raw)
            kind = message.get("type")
            if kind == "snapshot":
                revision = message["revision"]
                continue
            if kind != "patch":
                continue
            measuring = win.start <= now < win.end
            if revision is not None and message["base"] != revision:
                if message["revision"] <= revision:
                    continue  # stale
                if measuring:
                    win.lost += message["base"] - revision
                    win.resyncs += 1
                await ws.send('{"type":"snapshot"}')  # what chat.js does on a gap
            revision = message["revision"]
            stamps = [float(s) for text in appended(message["ops"]) for s in findall(text)]
            if stamps and not flowing:
                flowing = True
                ready.append(i)  # deltas are flowing on this stream
            if not measuring:
                continue
            win.record(now, stamps)
    except Exception as exc:
        errors.append(f"recv: {type(exc).__name__}: {exc}"[:200])
    finally:
        # The explicit Stop, so the next step starts clean; then wait (bounded) for `terminal`.
        with contextlib.suppress(Exception):
            await ws.send('{"type":"cancel"}')
            async with asyncio.timeout(15):
                while True:
                    m = await ws.recv()
                    if '"type":"terminal"' in (m if isinstance(m, str) else m.decode()):
                        break
        with contextlib.suppress(Exception):
            await ws.close()


async def _viewer_naive(cfg: dict[str, Any], i: int, win: Window, gate: asyncio.Semaphore, ready: list[int],
                        errors: list[str]) -> None:
    import orjson
    from websockets.asyncio.client import connect

    port = cfg["port"]
    query = f"tokens_per_s={cfg['tokens_per_s']}&tokens={cfg['tokens']}&seed={cfg['seed'] + i}&stamp=1"
    async with gate:
        try:
            ws = await connect(f"ws://127.0.0.1:{port}/ws/naive/?{query}", compression=None, proxy=None,
                               open_timeout=30, ping_interval=None)
        except Exception as exc:
            errors.append(f"setup: {type(exc).__name__}: {exc}"[:200])
            return
    flowing = False
    last_seq: int | None = None
    loads = orjson.loads
    findall = STAMP.findall
    try:
        async for now, raw in _received(ws, win):
            message = loads(raw)
            last_seq = win.sequence(now, last_seq, message)
            if not flowing:
                flowing = True
                ready.append(i)
            if not win.start <= now < win.end:
                continue
            stamps = [float(s) for s in findall(message["delta"])]
            win.record(now, stamps)
    except Exception as exc:
        errors.append(f"recv: {type(exc).__name__}: {exc}"[:200])
    finally:
        with contextlib.suppress(Exception):
            await ws.close()


async def load_tasks(cfg: dict[str, Any]) -> dict[str, Any]:
    """The previous load generator (`--loadgen tasks`): websockets.asyncio, a receive loop per socket."""
    import httpx

    n = cfg["streams"]
    win = Window()
    ready: list[int] = []
    errors: list[str] = []
    gate = asyncio.Semaphore(cfg.get("ramp_concurrency", 16))
    token = "x" * 32
    http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{cfg['port']}", timeout=60,
                             cookies={"sessionid": cfg.get("session", ""), "csrftoken": token},
                             headers={"X-CSRFToken": token}, limits=httpx.Limits(max_connections=32))
    t_ramp = time.time()
    if cfg["target"] == "ours":
        tasks = [asyncio.create_task(_viewer_ours(cfg, i, win, http, gate, ready, errors)) for i in range(n)]
    else:
        tasks = [asyncio.create_task(_viewer_naive(cfg, i, win, gate, ready, errors)) for i in range(n)]
    # Ramp-up: every viewer connected (or failed), then a warm-up, then the measured window.
    deadline = time.time() + cfg.get("ramp_timeout", 90)
    while len(ready) + len([e for e in errors if e.startswith("setup")]) < n and time.time() < deadline:
        await asyncio.sleep(0.05)
    ramp = time.time() - t_ramp
    await asyncio.sleep(cfg["warmup"])
    pids = dict(cfg["pids"], load=os.getpid())
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    delay0 = {name: run_delay(pid) for name, pid in pids.items()}
    loop0 = main_thread_cpu(pids["server"])
    load0 = os.getloadavg()[0]
    lag_stats: dict[str, Any] = {}
    lag_task = lag_sampler(lag_stats)
    win.start = time.time()
    win.end = win.start + cfg["window"]
    spy = None
    if cfg.get("profile"):  # py-spy on the server over the measured window (this process's CPU is not the server's)
        spy = subprocess.Popen([str(Path(PY).parent / "py-spy"), "record", "--pid", str(pids["server"]),
                                "--duration", str(int(cfg["window"])), "--rate", "200", "--nonblocking",
                                "--format", cfg["profile"]["format"], "-o", cfg["profile"]["path"]],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    await asyncio.sleep(cfg["window"])
    elapsed = time.time() - win.start
    cpu = {name: (cpu_seconds(pid) - cpu0[name]) / elapsed for name, pid in pids.items()}
    delay = {name: (run_delay(pid) - delay0[name]) / elapsed for name, pid in pids.items()}
    cpu["server_loop"] = (main_thread_cpu(pids["server"]) - loop0) / elapsed
    lag_task.cancel()
    own_lags = lag_stats.get("loop_lag_ms", [])
    loadavg = (load0 + os.getloadavg()[0]) / 2
    async with asyncio.timeout(40):
        await asyncio.gather(*tasks, return_exceptions=True)
    if spy is not None:
        spy.wait(30)
    await http.aclose()
    expected = len(ready) * cfg["tokens_per_s"] * cfg["window"]
    cpu["load_procs"] = 1
    return {
        "target": cfg["target"], "streams": n, "connected": len(ready), "ramp_s": ramp, "window_s": elapsed,
        "messages": win.messages, "deltas": win.deltas, "lost": win.lost, "resyncs": win.resyncs,
        "expected_deltas": expected,
        "delivered": (win.deltas / (win.deltas + win.lost)) if win.deltas + win.lost else 0.0,
        "rate": win.deltas / expected if expected else 0.0,
        "newest": {f"p{q}": pct(win.newest, q) for q in (50, 90, 99)} | {"max": max(win.newest, default=float("nan"))},
        "oldest": {f"p{q}": pct(win.oldest, q) for q in (50, 90, 99)} | {"max": max(win.oldest, default=float("nan"))},
        "cpu": cpu, "run_delay": delay, "loadavg": loadavg,
        "load_loop_lag_ms": {"p99": pct(own_lags, 99), "max": max(own_lags, default=float("nan"))},
        "load_us_per_frame": cpu["load"] * elapsed / max(win.messages, 1) * 1e6,
        "errors": errors[:5], "error_count": len(errors),
    }

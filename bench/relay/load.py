"""The relay benchmark's load coordinator (`python -m bench.relay --role load`): one step's viewers.

The step's viewers run in `load_procs` load processes (bench/relay/loadgen.py, `--role loadpart`:
one receive loop each over its share of the streams). The coordinator starts them, waits until
every one has ramped up, hands them all one window start, and measures every process's CPU
(the server, the simulator, the load processes) over that window from /proc. Beside the relay's
streams it reads `control` streams straight from the simulator: the lag the simulator, the
machine and the load side add by themselves, at the same moments.

`--loadgen tasks` runs the previous generator instead (bench/relay/tasks.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import PY, cpu_seconds, main_thread_cpu, pct, run_delay
from bench.relay.plan import LAG_LIMIT_MS
from bench.relay.tasks import load_tasks
from bench.stamps import STAMP

SERVER_LAG_SERIES: list[tuple[float, float]] = []


async def _sample_loop_lag(port: int, out: list[float], t0: float, period: float = 0.1) -> None:
    """The server's own loop-lag gauge (the pacer's input, relay_event_loop_lag_seconds), from /metrics."""
    import httpx

    pattern = re.compile(rb"^relay_event_loop_lag_seconds\S* (\S+)$", re.M)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
        while True:
            with contextlib.suppress(Exception):
                found = pattern.search((await http.get("/metrics")).content)
                if found:
                    out.append(float(found.group(1)) * 1000)
                    SERVER_LAG_SERIES.append((round(time.time() - t0, 2), out[-1]))
            await asyncio.sleep(period)


async def _control(cfg: dict[str, Any], out: list[tuple[float, float]]) -> None:
    """Streams read straight from the simulator (no relay), their deltas' (receipt time, receipt - emit):
    the lag the simulator, the machine and the load side add by themselves, at the same moments."""
    import httpx
    import orjson

    from responses_app.simulator.auth import DEV_API_KEY

    async def one(i: int) -> None:
        body = {"model": "sim-long", "input": "Tell me something long.", "stream": True, "metadata": {
            "sim.tokens_per_s": str(cfg["tokens_per_s"]), "sim.tokens": str(cfg["tokens"]),
            "sim.seed": str(cfg["seed"] + 10**6 + i), "sim.stamp": "true"}}
        async with client.stream("POST", f"{cfg['simulator']}/responses", content=orjson.dumps(body),
                                 headers={"content-type": "application/json"}) as response:
            async for chunk in response.aiter_bytes():
                now = time.time()
                out.extend((now, (now - float(s)) * 1000) for s in STAMP.findall(chunk.decode(errors="replace")))

    async with httpx.AsyncClient(timeout=None, headers={"authorization": f"Bearer {DEV_API_KEY}"}) as client:
        await asyncio.gather(*(one(i) for i in range(cfg["control"])), return_exceptions=True)


async def load(cfg: dict[str, Any]) -> dict[str, Any]:
    """The step's viewers in `load_procs` processes (bench/loadgen.py: one receive loop each), started,
    ramped up, then given one window start; this coordinator measures every process's CPU over it."""
    if cfg.get("loadgen") == "tasks":
        return await load_tasks(cfg)
    n, k = cfg["streams"], max(1, min(cfg.get("load_procs", 2), cfg["streams"]))
    shares = [n // k + (1 if j < n % k else 0) for j in range(k)]
    firsts = [sum(shares[:j]) for j in range(k)]
    control: list[tuple[float, float]] = []
    controller = asyncio.create_task(_control(cfg, control)) if cfg.get("control") else None
    t_ramp = time.time()
    outs = tempfile.mkdtemp(prefix="relay-load-")  # results by file: a pipe's 64 KiB could cut them short
    children = [await asyncio.create_subprocess_exec(
        PY, "-m", "bench.relay", "--role", "loadpart", "--config",
        json.dumps(dict(cfg, streams=shares[j], first=firsts[j], coordinated=True, out=f"{outs}/{j}.json",
                        ramp_concurrency=max(2, cfg.get("ramp_concurrency", 16) // k))),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, limit=2**26) for j in range(k)]
    try:
        async with asyncio.timeout(cfg.get("ramp_timeout", 90) + 30):
            readies = [json.loads(await c.stdout.readline()) for c in children]  # type: ignore[union-attr]
    except Exception:
        for c in children:
            with contextlib.suppress(ProcessLookupError):
                c.kill()
        errs = [(await c.communicate())[1].decode()[-1500:] for c in children]
        raise RuntimeError(f"load processes did not ramp up: {errs}") from None
    ramp = time.time() - t_ramp
    start_at = time.time() + cfg["warmup"]
    for c in children:
        c.stdin.write(f"{start_at}\n".encode())  # type: ignore[union-attr]
        await c.stdin.drain()  # type: ignore[union-attr]
    await asyncio.sleep(start_at - time.time())
    pids = dict(cfg["pids"], **{f"load{j}": c.pid for j, c in enumerate(children)})
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    delay0 = {name: run_delay(pid) for name, pid in pids.items()}
    loop0 = main_thread_cpu(pids["server"])
    load0, t0 = os.getloadavg()[0], time.time()
    server_lag: list[float] = []
    # Only where its figures are shown (capacity): scraping /metrics costs the server CPU that the
    # CPU section would count as the relay's (bench/README.md, "The CPU section's own costs").
    sampler = asyncio.create_task(_sample_loop_lag(cfg["port"], server_lag, start_at)) \
        if cfg["target"] == "ours" and cfg.get("sample_lag") else None
    await asyncio.sleep(cfg["window"])
    elapsed = time.time() - t0
    cpu = {name: (cpu_seconds(pid) - cpu0[name]) / elapsed for name, pid in pids.items()}
    delay = {name: (run_delay(pid) - delay0[name]) / elapsed for name, pid in pids.items()}
    cpu["server_loop"] = (main_thread_cpu(pids["server"]) - loop0) / elapsed
    cpu["load"] = sum(cpu.pop(f"load{j}") for j in range(k))
    delay["load"] = max(delay.pop(f"load{j}") for j in range(k))
    cpu["load_procs"] = k
    if sampler is not None:
        sampler.cancel()
    if controller is not None:
        controller.cancel()
    control_lags = [lag for at, lag in control if start_at <= at < start_at + cfg["window"]]
    control_worst = sorted(((lag, round(at - start_at, 2)) for at, lag in control
                            if start_at <= at < start_at + cfg["window"]), reverse=True)[:5]
    parts: list[dict[str, Any]] = []
    for c in children:
        out, err = await c.communicate()
        if c.returncode != 0:
            raise RuntimeError(f"load process failed ({c.returncode}):\n{err.decode()[-3000:]}")
        parts.append(json.loads(Path(outs, f"{len(parts)}.json").read_text()))
    shutil.rmtree(outs, ignore_errors=True)
    newest = [x for p in parts for x in p["newest_ms"]]
    oldest = [x for p in parts for x in p["oldest_ms"]]
    deltas, lost = sum(p["deltas"] for p in parts), sum(p["lost"] for p in parts)
    connected = sum(p["connected"] for p in parts)
    first_views = [x for p in parts for x in p["first_view_s"]]
    bursts = [x for p in parts for x in (p.get("burst") or {}).get("first_view_s", [])]
    errors = [e for p in parts for e in p["errors"]]
    expected = connected * cfg["tokens_per_s"] * cfg["window"]
    # When the lag happened: per 100 ms of receipt time, the messages and their worst lag (a stall of
    # the whole server shows as every stream's lag rising at once; the worst buckets are reported).
    buckets: dict[int, list[float]] = {}
    for p in parts:
        for at, lag in zip(p["at"], p["newest_ms"], strict=True):
            b = buckets.setdefault(int((at - start_at) * 10), [0, 0.0, 0])
            b[0] += 1
            b[1] = max(b[1], lag)
            b[2] += lag > LAG_LIMIT_MS
    worst = sorted(((v[1], k / 10, v[0], v[2]) for k, v in buckets.items()), reverse=True)[:8]
    per_frame = [p["cpu"] / max(p["messages"], 1) * elapsed * 1e6 for p in parts]
    return {
        "target": cfg["target"], "streams": n, "connected": connected, "ramp_s": ramp, "window_s": elapsed,
        "start_at": start_at, "messages": sum(p["messages"] for p in parts), "deltas": deltas, "lost": lost,
        "resyncs": sum(p["resyncs"] for p in parts), "expected_deltas": expected,
        "delivered": deltas / (deltas + lost) if deltas + lost else 0.0,
        "rate": deltas / expected if expected else 0.0,
        "newest": {f"p{q}": pct(newest, q) for q in (50, 90, 99)} | {"max": max(newest, default=float("nan"))},
        "oldest": {f"p{q}": pct(oldest, q) for q in (50, 90, 99)} | {"max": max(oldest, default=float("nan"))},
        "cpu": cpu, "run_delay": delay, "loadavg": (load0 + os.getloadavg()[0]) / 2,
        "load_loop_lag_ms": {"p99": max(p["loop_lag_ms"]["p99"] for p in parts),
                             "max": max(p["loop_lag_ms"]["max"] for p in parts)},
        "load_us_per_frame": sum(per_frame) / len(per_frame),
        "server_loop_lag_ms": {"p50": pct(server_lag, 50), "max": max(server_lag, default=float("nan"))},
        "server_lag_series": SERVER_LAG_SERIES,
        "worst_100ms": [{"at_s": at, "max_ms": m, "messages": c, "over_limit": o} for m, at, c, o in worst],
        "over_limit": sum(v[2] for v in buckets.values()),
        "control": {"streams": cfg.get("control", 0), "deltas": len(control_lags), "p50": pct(control_lags, 50),
                    "p99": pct(control_lags, 99), "max": max(control_lags, default=float("nan")),
                    "worst": control_worst},
        "ready": readies, "errors": errors[:5], "error_count": len(errors),
        "first_view": {"sockets": len(first_views), "none": sum(p["no_first_view"] for p in parts),
                       "p50": pct(first_views, 50), "p99": pct(first_views, 99),
                       "max": max(first_views, default=float("nan"))},
        "burst": {"sockets": len(bursts), "failed": sum((p.get("burst") or {}).get("failed", 0) for p in parts),
                  "p50": pct(bursts, 50), "p99": pct(bursts, 99), "max": max(bursts, default=float("nan"))}
        if cfg.get("burst") else {},
    }

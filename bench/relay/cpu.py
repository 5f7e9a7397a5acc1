"""The relay benchmark's CPU section: the server's CPU per relayed delta, beside the floor.

    python -m bench relay --only cpu [--cpu-streams 100] [--cpu-rounds 2] [--baseline DIR]

Measured in one run, one after another against the same simulator, each over the same window:

* *floor*: a plain reader of the same paced streams in its own process (`httpx.AsyncClient` over
  httpx-aiohttp, each chunk through the core's StreamPipeline, as the relay reads them), its CPU
  per event read: what a relay cannot avoid spending to read the bytes;
* *ours*: our server's CPU (all threads) per relayed delta, with one and with three viewers
  per stream (per relayed delta: deltas received by viewers / viewers per stream);
* *bare*: the least a relay can do on our stack (bench/relay/bare.py), the section's lower bound;
* *naive*: the naive relay's CPU per delivered delta (one viewer; it reads one upstream per viewer);
* *before* (with `--baseline DIR`): the same server started from another checkout, e.g. the tree
  before a change, so old and new are compared side by side in one run.

The floor is measured twice (first and last), and the mean of the two is the ratio's base: the
machine is shared, so only ratios within one run mean much.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from bench.harness import cpu_seconds

VIEWERS = (1, 3)


# --- role: floor (a plain reader of the same streams) -------------------------------------------


async def floor(cfg: dict[str, Any]) -> dict[str, Any]:
    import httpx
    import orjson
    from httpx_aiohttp import AiohttpTransport

    from responses_app.simulator.auth import DEV_API_KEY
    from responses_app.streaming.pipeline import StreamPipeline

    n = cfg["streams"]
    # as the relay's upstream.make_transport: the default pool (100) would queue streams past it
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=min(n + 10, 100))
    client = httpx.AsyncClient(transport=AiohttpTransport(limits=limits), timeout=None,
                               headers={"authorization": f"Bearer {DEV_API_KEY}"})
    counts = [0] * n
    flowing: set[int] = set()

    async def one(i: int) -> None:
        body = {"model": "sim-long", "input": "Tell me something long.", "stream": True, "metadata": {
            "sim.tokens_per_s": str(cfg["tokens_per_s"]), "sim.tokens": str(cfg["tokens"]),
            "sim.seed": str(cfg["seed"] + i), "sim.stamp": "true"}}
        pipeline = StreamPipeline()
        async with client.stream("POST", f"{cfg['simulator']}/responses", content=orjson.dumps(body),
                                 headers={"content-type": "application/json"}) as response:
            async for chunk in response.aiter_bytes():
                counts[i] += len(pipeline.feed(chunk).events)
                if counts[i] > 5:
                    flowing.add(i)

    tasks = [asyncio.create_task(one(i)) for i in range(n)]
    t0 = time.monotonic()
    while len(flowing) < n and time.monotonic() - t0 < 90:
        await asyncio.sleep(0.05)
    ramp = time.monotonic() - t0
    await asyncio.sleep(cfg["warmup"])
    others = cfg.get("pids", {})  # e.g. the simulator: its CPU over the same window
    others0 = {name: cpu_seconds(pid) for name, pid in others.items()}
    events0, cpu0, t1 = sum(counts), time.process_time(), time.monotonic()
    await asyncio.sleep(cfg["window"])
    events, cpu, elapsed = sum(counts) - events0, time.process_time() - cpu0, time.monotonic() - t1
    shares = {name: (cpu_seconds(pid) - others0[name]) / elapsed for name, pid in others.items()}
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.aclose()
    return {"streams": n, "connected": len(flowing), "ramp_s": ramp, "events": events, "cpu_s": cpu,
            "window_s": elapsed, "us_per_event": cpu / events * 1e6 if events else float("nan"),
            "rate": events / (n * cfg["tokens_per_s"] * elapsed), "loop": cfg.get("loop", "asyncio"),
            "others": shares}


# --- derived figures and the table -------------------------------------------------------------


def per_delta(r: dict[str, Any], viewers: int) -> float:
    """µs of server CPU (all threads) per relayed delta: delivered deltas / viewers per stream."""
    relayed = r["deltas"] / viewers
    return r["cpu"]["server"] * r["window_s"] / relayed * 1e6 if relayed else float("nan")


def derive(res: dict[str, Any]) -> dict[str, Any]:
    floors = [f["us_per_event"] for f in res["floor"] if f.get("loop", "asyncio") == "asyncio"]
    base = sum(floors) / len(floors)
    rows = []
    for r in res["rows"]:
        us = per_delta(r, r["viewers"])
        share = r["cpu"]["server"]
        rows.append({**r, "us_per_delta": us, "vs_floor": us / base,
                     "us_per_delivered": us / r["viewers"],
                     "streams_per_core": r["connected"] / share if share else float("nan")})
    naive = next((x for x in rows if x["label"] == "naive"), None)
    for x in rows:
        x["naive_over"] = naive["us_per_delivered"] / x["us_per_delivered"] if naive and x["us_per_delivered"] \
            else float("nan")
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for x in rows:
        groups.setdefault((x["label"], x["viewers"]), []).append(x)
    summary = [{"label": label, "viewers": v, "runs": len(xs), "ours": xs[0].get("ours", False),
                "us_per_delta": statistics.median(x["us_per_delta"] for x in xs),
                "vs_floor": statistics.median(x["vs_floor"] for x in xs),
                "naive_over": statistics.median(x["naive_over"] for x in xs),
                "streams_per_core": statistics.median(x["streams_per_core"] for x in xs)}
               for (label, v), xs in groups.items()]
    uvloop_floors = [f["us_per_event"] for f in res["floor"] if f.get("loop") == "uvloop"]
    return {"floor_us": base, "floors": floors, "rows": rows, "summary": summary,
            "uvloop_floor_us": sum(uvloop_floors) / len(uvloop_floors) if uvloop_floors else None}


def render(res: dict[str, Any], streams: int, tokens_per_s: int, window: float) -> str:
    d = derive(res)
    out = [f"### CPU per relayed delta ({streams} streams x {tokens_per_s} deltas/s, {window:.0f} s window each, "
           "one after another in one run)\n",
           "| server | viewers/stream | deltas received | deltas/frame | rate | lag p50 · p99 ms | server CPU (loop) "
           "| µs CPU per relayed delta | vs floor | µs per delivered delta | naive / this, per delivered "
           "| streams per core |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for x in d["rows"]:
        out.append(f"| {x['label']} | {x['viewers']} | {x['deltas']:,} | {x['deltas'] / max(x['messages'], 1):.2f} "
                   f"| {x['rate']:.0%} "
                   f"| {x['newest']['p50']:,.0f} · {x['newest']['p99']:,.0f} "
                   f"| {x['cpu']['server']:.0%} ({x['cpu']['server_loop']:.0%}) | {x['us_per_delta']:.0f} "
                   f"| {x['vs_floor']:.2f}× | {x['us_per_delivered']:.0f} | {x['naive_over']:.1f}× "
                   f"| {x['streams_per_core']:.0f} |")
    out.append("\nMedians per server and viewers per stream:\n")
    out.append("| server | viewers/stream | runs | µs CPU per relayed delta | vs floor | naive / this, per delivered "
               "| streams per core |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for x in d["summary"]:
        name = f"**{x['label']}** (ours)" if x["ours"] else x["label"]
        out.append(f"| {name} | {x['viewers']} | {x['runs']} | {x['us_per_delta']:.0f} | {x['vs_floor']:.2f}× "
                   f"| {x['naive_over']:.1f}× | {x['streams_per_core']:.0f} |")
    if d["uvloop_floor_us"]:
        out.append(f"\nThe floor reader on uvloop instead of asyncio's loop: {d['uvloop_floor_us']:.1f} µs per event.")
    floors = ", ".join(f"{f:.1f}" for f in d["floors"])
    out.append(f"\n*floor*: a plain httpx-aiohttp reader of {streams} of the same streams (with the core's "
               f"StreamPipeline), in its own process: **{d['floor_us']:.1f} µs per event** (first and last "
               f"run: {floors}). *µs CPU per relayed delta*: the server process's CPU (all threads, "
               "/proc/<pid>/stat) over the window / (deltas received by the viewers / viewers per stream). "
               "*streams per core*: streams / the server's share of a core, at this load (paced streams "
               "cost CPU per delta, so this is per 30-delta/s stream). *naive / this*: the naive relay's "
               "CPU per delivered delta over this row's; the naive relay cannot keep up at this load, "
               "so its figure is per delta it managed to deliver. *deltas/frame*: deltas per websocket "
               "message; a server short of CPU sends fewer, larger patches (the pacer), which lowers its "
               "cost per delta, so compare rows at similar lag.\n")
    return "\n".join(out)

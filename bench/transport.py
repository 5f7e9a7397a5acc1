"""Which httpx transport should the relay read the upstream with? CPU per streamed event.

N concurrent paced streams from the simulator (its own process) are read with the same
`httpx.AsyncClient` API over (a) httpx's default transport and (b) the httpx-aiohttp transport,
each chunk going through the relay's StreamPipeline. The client process's CPU time per event is
what one relay core can afford, so the cheaper transport is the default (responses_app/upstream.py).

    python -m bench transport [--streams 200] [--tokens-per-s 30] [--seconds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from responses_app.simulator.auth import DEV_API_KEY
from responses_app.streaming.pipeline import StreamPipeline
from tests.servers import start_simulator, stop

RESULTS = Path(__file__).resolve().parent / "results" / "transport.md"


async def read_streams(base: str, transport: httpx.AsyncBaseTransport, streams: int, tokens_per_s: int,
                       seconds: float) -> tuple[int, float]:
    limits = httpx.Limits(max_connections=streams + 10, max_keepalive_connections=streams + 10)
    auth = {"authorization": f"Bearer {DEV_API_KEY}"}  # the standalone simulator's default key
    client = httpx.AsyncClient(transport=transport, timeout=None, limits=limits, headers=auth) if isinstance(
        transport, httpx.AsyncHTTPTransport) else httpx.AsyncClient(transport=transport, timeout=None, headers=auth)
    tokens = int(tokens_per_s * (seconds + 30))
    body = {"model": "sim-long", "input": "bench", "stream": True,
            "metadata": {"sim.tokens_per_s": str(tokens_per_s), "sim.tokens": str(tokens)}}
    counts = [0] * streams
    started = asyncio.Event()

    async def one(i: int) -> None:
        pipeline = StreamPipeline()
        async with client.stream("POST", f"{base}/responses", content=orjson.dumps(body),
                                 headers={"content-type": "application/json"}) as response:
            async for chunk in response.aiter_bytes():
                counts[i] += len(pipeline.feed(chunk).events)
                if started.is_set() is False and sum(counts) > streams * 5:
                    started.set()

    tasks = [asyncio.create_task(one(i)) for i in range(streams)]
    await asyncio.wait_for(started.wait(), 60)
    await asyncio.sleep(1.0)  # let every stream reach its pace
    events0, cpu0 = sum(counts), time.process_time()
    await asyncio.sleep(seconds)
    events, cpu = sum(counts) - events0, time.process_time() - cpu0
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.aclose()
    return events, cpu


def run(streams: int, tokens_per_s: int, seconds: float) -> list[dict[str, Any]]:
    from httpx_aiohttp import AiohttpTransport

    proc, base = start_simulator()
    rows = []
    try:
        for name, make in (("httpx default (AsyncHTTPTransport)", httpx.AsyncHTTPTransport),
                           ("httpx-aiohttp (AiohttpTransport)", AiohttpTransport)):
            events, cpu = asyncio.run(read_streams(base, make(), streams, tokens_per_s, seconds))
            rows.append({"transport": name, "events": events, "cpu_s": cpu,
                         "us_per_event": cpu / events * 1e6 if events else float("nan"),
                         "core_share": cpu / seconds})
    finally:
        stop(proc)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench transport")
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--tokens-per-s", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    rows = run(args.streams, args.tokens_per_s, args.seconds)
    base = rows[0]["us_per_event"]
    lines = [
        "# Upstream transport benchmark", "",
        f"{args.streams} concurrent `sim-long` streams at {args.tokens_per_s} tokens/s from the simulator in its "
        f"own process, read through `httpx.AsyncClient(...).stream()` and the relay's StreamPipeline, "
        f"{args.seconds:.0f} s steady state; CPU of the reading process only. "
        f"Reproduce: `python -m bench transport --streams {args.streams} --tokens-per-s {args.tokens_per_s}`.", "",
        "| transport | events | CPU s | µs CPU/event | share of a core | vs default |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(f"| {row['transport']} | {row['events']:,} | {row['cpu_s']:.2f} | {row['us_per_event']:.1f} | "
                     f"{row['core_share']:.0%} | {base / row['us_per_event']:.2f}× |")
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()

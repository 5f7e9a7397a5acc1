"""How many events per second the simulator emits on one core, and its CPU time per event.

Starts the standalone simulator in its own process, opens N concurrent streams from this process
with a minimal raw-socket HTTP client (so the client stays cheap), and reads the server's CPU time
from /proc/<pid>/stat before and after. Prints its figures; writes no results file.

    python -m bench simulator [--streams 1000] [--tokens 2000] [--tokens-per-s 0]
    python -m bench.simulator_throughput ...     # the same
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from bench.harness import cpu_seconds
from responses_app.simulator.auth import DEV_API_KEY
from tests.servers import start_simulator, stop


async def one_stream(host: str, port: int, payload: bytes) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"POST /v1/responses HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
                 b"Authorization: Bearer " + DEV_API_KEY.encode() + b"\r\n"
                 b"Connection: close\r\nContent-Length: " + str(len(payload)).encode() + b"\r\n\r\n"
                 + payload)
    events = 0
    tail = b""
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        data = tail + chunk
        events += data.count(b"\ndata: ") + (1 if not tail and data.startswith(b"data: ") else 0)
        tail = data[-8:]
    writer.close()
    return events


async def run(url: str, streams: int, tokens: int, tps: float) -> tuple[int, float]:
    hostport = url.split("//", 1)[1].split("/", 1)[0]
    host, port = hostport.rsplit(":", 1)
    payloads = [json.dumps({"model": "sim-long", "input": f"bench {n}", "stream": True,
                            "metadata": {"sim.tokens": str(tokens), "sim.tokens_per_s": str(tps),
                                         "sim.seed": str(n)}}).encode() for n in range(streams)]
    started = time.perf_counter()
    counts = await asyncio.gather(*(one_stream(host, int(port), p) for p in payloads))
    return sum(counts), time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench simulator")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--tokens-per-s", type=float, default=0.0)
    args = parser.parse_args(argv)
    proc, url = start_simulator()
    try:
        asyncio.run(run(url, 5, 200, 0))  # warm up
        before = cpu_seconds(proc.pid)
        events, elapsed = asyncio.run(run(url, args.streams, args.tokens, args.tokens_per_s))
        cpu = cpu_seconds(proc.pid) - before
    finally:
        stop(proc)
    pace = f"tokens_per_s={args.tokens_per_s:g}"
    print(f"{args.streams} streams x sim-long ({args.tokens} tokens, {pace}): "
          f"{events:,} events in {elapsed:.2f}s wall")
    print(f"simulator CPU {cpu:.2f}s -> {events / cpu:,.0f} events/s per core, "
          f"{cpu / events * 1e6:.2f} us CPU/event; wall rate {events / elapsed:,.0f} events/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

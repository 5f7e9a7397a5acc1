"""Which httpx transport should the relay read the upstream with? CPU per streamed event.

N concurrent paced streams from the simulator (its own process) are read with the same
`httpx.AsyncClient` API over (a) httpx's default transport and (b) the httpx-aiohttp transport,
each chunk going through the relay's StreamPipeline. The client process's CPU time per event is
what one relay core can afford, so the cheaper transport is the default (responses_app/upstream/http.py).
Two more readers bound what a cheaper read path could still save: (c) the relay's own path,
httpx-aiohttp with `upstream.body_chunks` (aiohttp's buffer read straight, one task wakeup per
chunk), and (d) a bare `asyncio.Protocol` that decodes the chunked body and feeds the pipeline in
`data_received` (no task, no future per chunk: the least a Python reader on asyncio can do).

    python -m bench transport [--streams 200] [--tokens-per-s 30] [--seconds 8] [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.harness import keep_notes
from responses_app.simulator.auth import DEV_API_KEY
from responses_app.streaming.pipeline import StreamPipeline
from tests.servers import start_simulator, stop

RESULTS = Path(__file__).resolve().parent / "results" / "transport.md"


def _body(tokens_per_s: int, seconds: float) -> bytes:
    """A paced `sim-long` request that outlasts the measurement."""
    tokens = int(tokens_per_s * (seconds + 30))
    return orjson.dumps({"model": "sim-long", "input": "bench", "stream": True,
                         "metadata": {"sim.tokens_per_s": str(tokens_per_s), "sim.tokens": str(tokens)}})


async def read_streams(base: str, transport: httpx.AsyncBaseTransport | None, streams: int, tokens_per_s: int,
                       seconds: float, chunks: str = "aiter_bytes") -> tuple[int, float]:
    """`transport` None: the bare protocol reader; `chunks`: "aiter_bytes" or "body_chunks" (the relay's)."""
    if transport is None:
        return await _read_protocol(base, streams, tokens_per_s, seconds)
    from responses_app.upstream.http import body_chunks

    limits = httpx.Limits(max_connections=streams + 10, max_keepalive_connections=streams + 10)
    auth = {"authorization": f"Bearer {DEV_API_KEY}"}  # the standalone simulator's default key
    client = httpx.AsyncClient(transport=transport, timeout=None, limits=limits, headers=auth) if isinstance(
        transport, httpx.AsyncHTTPTransport) else httpx.AsyncClient(transport=transport, timeout=None, headers=auth)
    body = _body(tokens_per_s, seconds)
    counts = [0] * streams
    started = asyncio.Event()

    async def one(i: int) -> None:
        pipeline = StreamPipeline()
        async with client.stream("POST", f"{base}/responses", content=body,
                                 headers={"content-type": "application/json"}) as response:
            async for chunk in (body_chunks(response) if chunks == "body_chunks" else response.aiter_bytes()):
                counts[i] += len(pipeline.feed(chunk).events)
                if started.is_set() is False and sum(counts) > streams * 5:
                    started.set()

    try:
        return await _measure([one(i) for i in range(streams)], counts, started, seconds)
    finally:
        await client.aclose()


async def _measure(coros: list[Any], counts: list[int], started: asyncio.Event, seconds: float) -> tuple[int, float]:
    tasks = [asyncio.create_task(coro) for coro in coros]
    await asyncio.wait_for(started.wait(), 60)
    await asyncio.sleep(1.0)  # let every stream reach its pace
    events0, cpu0 = sum(counts), time.process_time()
    await asyncio.sleep(seconds)
    events, cpu = sum(counts) - events0, time.process_time() - cpu0
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return events, cpu


async def _read_protocol(base: str, streams: int, tokens_per_s: int, seconds: float) -> tuple[int, float]:
    """The bare reader: HTTP/1.1 by hand, the chunked body decoded in `data_received`."""
    from urllib.parse import urlsplit

    url = urlsplit(base)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    payload = _body(tokens_per_s, seconds)
    head = (f"POST {url.path}/responses HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {DEV_API_KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n").encode() + payload
    counts = [0] * streams
    started = asyncio.Event()

    class Reader(asyncio.Protocol):
        def __init__(self, i: int, done: asyncio.Future[None]) -> None:
            self.i, self.done, self.pipeline = i, done, StreamPipeline()
            self.buffer, self.in_head = b"", True

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            transport.write(head)  # type: ignore[attr-defined]

        def data_received(self, data: bytes) -> None:
            buffer = self.buffer + data if self.buffer else data
            if self.in_head:
                at = buffer.find(b"\r\n\r\n")
                if at < 0:
                    self.buffer = buffer
                    return
                buffer, self.in_head = buffer[at + 4:], False
            pos, parts = 0, []
            while (line_end := buffer.find(b"\r\n", pos)) >= 0:
                size = int(buffer[pos:line_end], 16)
                end = line_end + 2 + size
                if size == 0 or len(buffer) < end + 2:
                    break
                parts.append(buffer[line_end + 2:end])
                pos = end + 2
            self.buffer = buffer[pos:]
            if parts:
                self.count(b"".join(parts))

        def count(self, chunk: bytes) -> None:
            counts[self.i] += len(self.pipeline.feed(chunk).events)
            if started.is_set() is False and sum(counts) > streams * 5:
                started.set()

        def connection_lost(self, exc: Exception | None) -> None:
            if not self.done.done():
                self.done.set_result(None)

    async def one(i: int) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        transport, _ = await loop.create_connection(lambda: Reader(i, done), host, port)
        try:
            await done
        finally:
            transport.close()

    return await _measure([one(i) for i in range(streams)], counts, started, seconds)


def run(streams: int, tokens_per_s: int, seconds: float, rounds: int = 1) -> list[dict[str, Any]]:
    from httpx_aiohttp import AiohttpTransport

    readers: list[tuple[str, Any, str]] = [
        ("httpx default (AsyncHTTPTransport)", httpx.AsyncHTTPTransport, "aiter_bytes"),
        ("httpx-aiohttp (AiohttpTransport)", AiohttpTransport, "aiter_bytes"),
        ("the relay's read: httpx-aiohttp + `upstream.body_chunks`", AiohttpTransport, "body_chunks"),
        ("bare `asyncio.Protocol`, decoded in `data_received`", None, ""),
    ]
    proc, base = start_simulator()
    rows = []
    try:
        for _ in range(rounds):  # alternated, so a busy spell on the shared machine hits every reader
            for name, make, chunks in readers:
                events, cpu = asyncio.run(read_streams(base, make() if make else None, streams, tokens_per_s,
                                                       seconds, chunks))
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
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the readers, alternated")
    args = parser.parse_args(argv)
    rows = run(args.streams, args.tokens_per_s, args.seconds, args.rounds)
    base = rows[0]["us_per_event"]
    lines = [
        "# Upstream transport benchmark", "",
        f"{args.streams} concurrent `sim-long` streams at {args.tokens_per_s} tokens/s from the simulator in its "
        f"own process, read through `httpx.AsyncClient(...).stream()` and the relay's StreamPipeline, "
        f"{args.seconds:.0f} s steady state; CPU of the reading process only. "
        f"Reproduce: `python -m bench transport --streams {args.streams} --tokens-per-s {args.tokens_per_s} "
        f"--rounds {args.rounds}`. Readers alternated over the rounds, one row per reader per round, in the "
        f"order run.", "",
        "| transport | events | CPU s | µs CPU/event | share of a core | vs default |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(f"| {row['transport']} | {row['events']:,} | {row['cpu_s']:.2f} | {row['us_per_event']:.1f} | "
                     f"{row['core_share']:.0%} | {base / row['us_per_event']:.2f}× |")
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(keep_notes(RESULTS, text))


if __name__ == "__main__":
    main()

"""A 10-round tool conversation through the simulator over SSE and over WebSocket mode, side by side.

Each conversation is 10 responses chained by `previous_response_id`: a function call first, then 9
rounds that send a `function_call_output` and read the answer, as the relay's tool rounds do. The
relay's own clients read them (`upstream.http.Upstream` on httpx-aiohttp for SSE, `upstream.websocket.
WebSocketUpstream` for WebSocket mode) into a `Transcript`; the simulator runs in its own process,
flat out (`sim.tokens_per_s` 0), so what differs is the per-round cost of the transport. Each
conversation starts with new clients (a cold connection); the transports alternate, one
conversation each in turn. Reported per round: wall time (median and p90), the simulator's CPU and
the CPU of this process's event loop thread.

    python -m bench tool_rounds [--conversations 30] [--rounds 10] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

from responses_app.simulator.auth import DEV_API_KEY  # noqa: E402
from responses_app.streaming.transcript import Transcript  # noqa: E402
from responses_app.upstream.http import Upstream, stream_reader  # noqa: E402
from responses_app.upstream.websocket import WebSocketUpstream  # noqa: E402
from tests.servers import start_simulator, stop  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "tool_rounds.md"
METADATA = {"sim.tokens_per_s": "0", "sim.tokens": "40"}


def cpu_seconds(pid: int) -> float:
    """The process's CPU time, every thread's, in nanoseconds' precision (schedstat; /proc/pid/stat
    counts in ticks of 10 ms, coarser than a conversation)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return total / 1e9


async def one_round(upstream: Upstream, body: dict[str, Any]) -> Transcript:
    transcript = Transcript()
    async with upstream.create_stream(body) as response:
        chunks, feed = stream_reader(response, transcript)
        async for chunk in chunks:  # to the end of the body (SSE) or of the lane's response
            feed(chunk, 0.0)
    transcript.finish()
    if transcript.status != "completed":
        raise RuntimeError(f"a round ended {transcript.status}")
    return transcript


async def conversation(make: Callable[[], Upstream], rounds: int, fresh_each_round: bool, tag: str) -> list[float]:
    """Seconds per round."""
    upstream = make()
    times: list[float] = []
    previous: str | None = None
    call: dict[str, Any] = {}
    try:
        for index in range(rounds):
            body: dict[str, Any] = {"model": "sim-function", "store": True, "metadata": METADATA,
                                    "stream_options": {"include_obfuscation": False}}
            if index == 0:
                body["input"] = f"What is the weather? ({tag})"
            else:
                body["input"] = [{"type": "function_call_output", "call_id": call["call_id"],
                                  "output": f'{{"round": {index}}}'}]
                body["previous_response_id"] = previous
            if fresh_each_round and index:
                await upstream.aclose()
                upstream = make()
            started = time.perf_counter()
            transcript = await one_round(upstream, body)
            times.append(time.perf_counter() - started)
            previous = transcript.response_id
            if index == 0:
                call = transcript.function_calls()[0]
    finally:
        await upstream.aclose()
    return times


TRANSPORTS: list[tuple[str, str, bool]] = [
    # (label, kind, a new connection every round)
    ("SSE, httpx-aiohttp, keep-alive (the default)", "sse", False),
    ("SSE, a new connection every round", "sse", True),
    ("WebSocket mode, one connection", "websocket", False),
]


async def measure(url: str, pid: int, conversations: int, rounds: int) -> list[dict[str, Any]]:
    def maker(kind: str) -> Callable[[], Upstream]:
        if kind == "websocket":
            return lambda: WebSocketUpstream(base=url, api_key=DEV_API_KEY)
        return lambda: Upstream(base=url, api_key=DEV_API_KEY)

    for _label, kind, fresh in TRANSPORTS:  # warm-up: imports, first connections, the simulator's caches
        await conversation(maker(kind), rounds, fresh, "warm-up")
    stats: dict[str, dict[str, Any]] = {label: {"times": [], "first": [], "server": 0.0, "client": 0.0}
                                        for label, _, _ in TRANSPORTS}
    for n in range(conversations):
        order = TRANSPORTS if n % 2 == 0 else TRANSPORTS[::-1]
        for label, kind, fresh in order:
            server, client = cpu_seconds(pid), time.thread_time()
            times = await conversation(maker(kind), rounds, fresh, f"{n}")
            stats[label]["server"] += cpu_seconds(pid) - server
            stats[label]["client"] += time.thread_time() - client
            stats[label]["times"].extend(times)
            stats[label]["first"].append(times[0])
    rows = []
    for label, _, _ in TRANSPORTS:
        times = sorted(stats[label]["times"])
        count = len(times)
        rows.append({"label": label, "rounds": count, "median_ms": statistics.median(times) * 1000,
                     "p90_ms": times[int(count * 0.9) - 1] * 1000,
                     "first_ms": statistics.median(stats[label]["first"]) * 1000,
                     "later_ms": statistics.median(t for n, t in enumerate(stats[label]["times"]) if n % rounds) * 1000,
                     "server_us": stats[label]["server"] / count * 1e6,
                     "client_us": stats[label]["client"] / count * 1e6})
    return rows


def render(rows: list[dict[str, Any]], conversations: int, rounds: int, argv: list[str]) -> str:
    base = rows[0]
    lines = [
        "# Tool rounds: SSE against WebSocket mode", "",
        f"{conversations} conversations of {rounds} rounds per transport, chained by `previous_response_id` (a "
        "function call, then a `function_call_output` each round), read by the relay's own clients into a "
        "`Transcript`; the simulator in its own process, flat out, 40-token answers. Each conversation starts "
        "with new clients; the transports alternate. Server CPU is the simulator process's (/proc), client CPU "
        "this process's event loop thread (new clients each conversation included), each divided by the rounds. "
        f"Reproduce: `{' '.join(['python -m bench tool_rounds', *argv])}`.", "",
        "| transport | rounds | time per round, median | p90 | vs default | first round (cold) | later rounds | "
        "server CPU per round | client CPU per round |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(f"| {row['label']} | {row['rounds']} | {row['median_ms']:.2f} ms | {row['p90_ms']:.2f} ms | "
                     f"{row['median_ms'] / base['median_ms']:.2f}× | {row['first_ms']:.2f} ms | "
                     f"{row['later_ms']:.2f} ms | {row['server_us']:.0f} µs | {row['client_us']:.0f} µs |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench tool_rounds")
    parser.add_argument("--conversations", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="5 conversations, results not written")
    args = parser.parse_args(argv)
    conversations = 5 if args.quick else args.conversations
    proc, url = start_simulator()
    try:
        rows = asyncio.run(measure(url, proc.pid, conversations, args.rounds))
    finally:
        stop(proc)
    text = render(rows, conversations, args.rounds, argv)
    print(text)
    if not args.quick:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()

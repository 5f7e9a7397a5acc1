"""A viewer's frame from offer to the ASGI send: a queue and a woken writer task, or sent in offer.

    python -m bench outbox [--quick]

Three ways, alternated in rounds on uvloop (the loop the relay serves on), each frame offered by
a producer that yields to the loop once per frame, as a runner does once per chunk:

- **queue + writer**: `asyncio.Queue.put_nowait`, the writer task woken from `await get()`, then
  `await send(...)` (the consumer's path before issue #13's last round);
- **outbox + writer**: the same through `responses_app.outbox.Outbox` (its path when the writer is
  busy);
- **sent in offer**: the writer parked on the outbox, so offer runs the send itself (`send_now`),
  no task woken (its path now, whenever the writer waits).

The send is an ASGI server's websocket send without its socket write: it awaits a set
`asyncio.Event` (uvicorn's `writable`) and returns. Reported: CPU per frame over the producer's
own loop turn (`time.process_time`), median of the rounds, and the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvloop

from responses_app.outbox import Outbox, send_now

RESULTS = Path(__file__).resolve().parent / "results" / "outbox.md"


class Socket:
    def __init__(self) -> None:
        self.writable = asyncio.Event()
        self.writable.set()
        self.frames = 0

    async def send(self, message: dict[str, Any]) -> None:
        await self.writable.wait()
        self.frames += 1


async def _turns(n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        await asyncio.sleep(0)
    return time.process_time() - start


async def _queue(n: int) -> float:
    socket, queue = Socket(), asyncio.Queue[str](maxsize=64)

    async def writer() -> None:
        while True:
            text = queue.get_nowait() if not queue.empty() else await queue.get()
            await socket.send({"type": "websocket.send", "text": text})

    task = asyncio.get_running_loop().create_task(writer())
    await asyncio.sleep(0)
    start = time.process_time()
    for _ in range(n):
        queue.put_nowait("[1,1]")
        await asyncio.sleep(0)
    elapsed = time.process_time() - start
    task.cancel()
    assert socket.frames == n
    return elapsed


async def _outbox(n: int, *, in_offer: bool) -> float:
    socket, outbox = Socket(), Outbox(64)

    async def writer() -> None:
        while True:
            item = outbox.get_nowait() if not outbox.empty() else await outbox.get()
            if isinstance(item, str):
                await socket.send({"type": "websocket.send", "text": item})
            else:
                await item

    task = asyncio.get_running_loop().create_task(writer())
    await asyncio.sleep(0)
    start = time.process_time()
    for _ in range(n):
        if in_offer and outbox.parked:
            suspended = send_now(socket.send, {"type": "websocket.send", "text": "[1,1]"})
            if suspended is not None:
                outbox.put_nowait(suspended)
        else:
            outbox.put_nowait("[1,1]")
        await asyncio.sleep(0)
    elapsed = time.process_time() - start
    task.cancel()
    assert socket.frames == n
    return elapsed


WAYS: dict[str, Callable[[int], Awaitable[float]]] = {
    "queue + writer (before)": _queue,
    "outbox + writer": lambda n: _outbox(n, in_offer=False),
    "sent in offer (now)": lambda n: _outbox(n, in_offer=True),
}


async def measure(frames: int, rounds: int) -> dict[str, list[float]]:
    per_frame: dict[str, list[float]] = {name: [] for name in WAYS}
    for _ in range(rounds):
        turn = await _turns(frames)
        for name, way in WAYS.items():
            per_frame[name].append(max(0.0, await way(frames) - turn) / frames * 1e6)
    return per_frame


def render(per_frame: dict[str, list[float]], frames: int, rounds: int) -> str:
    before = statistics.median(per_frame["queue + writer (before)"])
    lines = [f"{rounds} rounds of {frames:,} frames, alternated, on uvloop; µs of CPU per frame over the producer's "
             "own loop turn (median of the rounds; each round's in brackets).", "",
             "| way | µs per frame | before / this |", "|---|---:|---:|"]
    for name, values in per_frame.items():
        median = statistics.median(values)
        runs = ", ".join(f"{v:.2f}" for v in values)
        lines.append(f"| {name} | {median:.2f} ({runs}) | {before / median:.1f}× |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench outbox")
    parser.add_argument("--quick", action="store_true", help="a smoke run; does not write the results file")
    args = parser.parse_args(argv)
    frames, rounds = (5_000, 2) if args.quick else (100_000, 5)
    per_frame = uvloop.run(measure(frames, rounds))
    table = render(per_frame, frames, rounds)
    print(table)
    if not args.quick:
        RESULTS.write_text("# A viewer's frame, offer to send\n\nGenerated by `python -m bench outbox` "
                           "(bench/outbox.py; what it measures is in its docstring).\n\n" + table)
        print(f"wrote {RESULTS.relative_to(RESULTS.parent.parent.parent)}")
    return 0

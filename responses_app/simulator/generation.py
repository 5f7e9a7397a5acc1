"""The generation task: paces a scenario's plan, numbers and serialises events, injects faults.

One task per response, paced by the loop's one PacingClock; events due together go to the log in
one batch.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
import time
from collections.abc import Iterator
from typing import Any

import orjson

from .dialects import DEFAULT as PLAIN_DIALECT
from .dialects import DialectWriter
from .emitter import Emitter, Step
from .faults import Faults, stamp_delta
from .objects import usage
from .scenarios import Context, error_payload
from .store import SimResponse
from .wire import sse_prefix

logger = logging.getLogger("responses_app.simulator")

_BATCH = 512  # events generated between yields to the loop when running flat out
_SLACK = 0.002  # tokens due within this many seconds go out with the current batch
# Never wake more often than this per stream: each wake costs a write (and, under Twisted, an epoll
# registration), so at demo paces two or three tokens share one write, as on real TCP streams.
_TICK = 0.05
# The shared clock's grid: every paced stream of a process wakes on it, so one timer serves them all.
_GRID = 0.01


class PacingClock:
    """One timer for every paced stream of an event loop, instead of a timer (and a loop wake-up
    of its own) per stream per write: a stream waits for the first tick of a 10 ms grid at or
    after its due time, and each tick resumes every stream due by then: a `sleep` per stream per
    write made the simulator the largest CPU user beside the relay under load (bench/README.md,
    relay). What each stream emits, and in which order, is unchanged."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._due: list[tuple[float, int, asyncio.Future[None]]] = []
        self._count = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def wait(self, due: float) -> asyncio.Future[None]:
        at = math.ceil(due / _GRID) * _GRID
        future = self.loop.create_future()
        self._count += 1
        heapq.heappush(self._due, (at, self._count, future))
        if at < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = at
            self._timer = self.loop.call_at(at, self._tick)
        return future

    def _tick(self) -> None:
        self._timer, self._timer_at = None, math.inf
        now = self.loop.time()
        due = self._due
        while due and due[0][0] <= now:
            future = heapq.heappop(due)[2]
            if not future.done():  # a cancelled stream's wait stays in the heap until its tick
                future.set_result(None)
        if due:
            self._timer_at = due[0][0]
            self._timer = self.loop.call_at(self._timer_at, self._tick)


_clocks: dict[int, PacingClock] = {}


def pacing_clock() -> PacingClock:
    """The running loop's clock (tests run several loops in one process)."""
    loop = asyncio.get_running_loop()
    clock = _clocks.get(id(loop))
    if clock is None or clock.loop is not loop:
        clock = _clocks[id(loop)] = PacingClock(loop)
    return clock


class Clock:
    """Wall-clock timestamps, or virtual ones from the seed so that seeded streams are identical."""

    def __init__(self, created_at: int, virtual: bool, tokens_per_s: float) -> None:
        self.created_at = created_at
        self.virtual = virtual
        self.tokens_per_s = tokens_per_s

    def now(self, tokens: float) -> int:
        if not self.virtual:
            return int(time.time())
        return self.created_at + (int(tokens / self.tokens_per_s) if self.tokens_per_s else 0)


def _fault_schedule(faults: Faults) -> list[tuple[int, int, str]]:
    # Ties at one sequence number fire in this order; error/fail end the stream.
    order = {"stall": 0, "malformed": 1, "unknown": 2, "error": 3, "fail": 4}
    pairs = [
        (faults.stall_at, "stall"),
        (faults.malformed_at, "malformed"),
        (faults.unknown_at, "unknown"),
        (faults.error_at, "error"),
        (faults.fail_at, "fail"),
    ]
    return sorted((k, order[kind], kind) for k, kind in pairs if k is not None)


async def generate(
    resp: SimResponse,
    plan: Iterator[Step],
    ctx: Context,
    emitter: Emitter,
    *,
    tokens_per_s: float,
    clock: Clock,
    input_tokens: int,
) -> None:
    loop = asyncio.get_running_loop()
    pacer = pacing_clock()
    dumps = orjson.dumps
    obj = resp.obj
    faults = resp.faults
    interval = 1.0 / tokens_per_s if tokens_per_s > 0 else 0.0
    entries: list[bytes] = []
    seqs: list[int] = []
    seq = 0
    tokens = 0.0
    schedule = _fault_schedule(faults)
    stamp = faults.stamp
    next_fault = schedule[0][0] if schedule else -1
    obj["output"] = emitter.output
    dialect = DialectWriter(faults.dialect) if faults.dialect not in (None, PLAIN_DIALECT) else None

    def push(event: dict[str, Any]) -> None:
        nonlocal seq
        event["sequence_number"] = seq
        if stamp and event["type"] == "response.output_text.delta":
            event = dict(event, delta=stamp_delta(event["delta"], time.time()))
        if dialect is not None:  # sim.dialect: another server's shape of the same event
            dialect.write(event, seq, entries, seqs)
            seq += 1
            return
        entries.append(sse_prefix(event["type"]) + dumps(event) + b"\n\n")
        seqs.append(seq)
        seq += 1

    def flush() -> None:
        if entries:
            resp.append(entries, seqs)
            entries.clear()
            seqs.clear()

    def terminal(
        status: str, error: dict[str, Any] | None = None, incomplete: dict[str, Any] | None = None
    ) -> None:
        obj["status"] = status
        obj["error"] = error
        obj["incomplete_details"] = incomplete
        obj["completed_at"] = clock.now(tokens) if status == "completed" else None
        obj["usage"] = usage(
            input_tokens, emitter.output_tokens + emitter.reasoning_tokens, emitter.reasoning_tokens
        )
        for item in emitter.output:
            if item.get("type") == "function_call":
                resp.calls[item["call_id"]] = (item["name"], item["arguments"])
        push({"type": f"response.{status}", "sequence_number": 0, "response": obj})

    async def fire(kind: str) -> bool:
        """Inject one fault; True when it ended the response."""
        nonlocal start  # type: ignore[misc]  # bound later in the enclosing function
        if kind == "stall":
            flush()
            await asyncio.sleep(faults.stall_ms / 1000)
            start += faults.stall_ms / 1000
        elif kind == "malformed":
            prev = seq - 1
            entries.append(
                sse_prefix("response.output_text.delta")
                + b'{"type":"response.output_text.delta","sequence_number":'
                + str(seq).encode()
                + b',"delta":"broken\n\n'
            )
            seqs.append(prev)
        elif kind == "unknown":
            push(
                {
                    "type": "response.simulator.unknown_event",
                    "sequence_number": 0,
                    "note": "An event type this client has never seen.",
                }
            )
        elif kind == "error":
            message = "An error occurred while processing your request (injected by sim.error_at)."
            push(error_payload("server_error", message))
            terminal("failed", {"code": "server_error", "message": message})
            return True
        elif kind == "fail":
            terminal(
                "failed",
                {
                    "code": "server_error",
                    "message": "The model failed to generate a response (injected by sim.fail_at).",
                },
            )
            return True
        return False

    async def due_faults(final: bool) -> bool:
        nonlocal next_fault
        while schedule and (final or seq >= schedule[0][0]):
            if await fire(schedule.pop(0)[2]):
                return True
        next_fault = schedule[0][0] if schedule else -1
        return False

    start = loop.time()
    try:
        push({"type": "response.created", "sequence_number": 0, "response": obj})
        if resp.background:
            push({"type": "response.queued", "sequence_number": 0, "response": obj})
        obj["status"] = "in_progress"
        push({"type": "response.in_progress", "sequence_number": 0, "response": obj})
        since_yield = 0
        for event, cost in plan:
            if next_fault >= 0 and seq >= next_fault and await due_faults(False):
                break
            if cost and interval:
                tokens += cost
                due = start + tokens * interval
                now = loop.time()
                if due > now + _SLACK:
                    flush()
                    await pacer.wait(max(due, now + _TICK))
                    since_yield = 0
            elif cost:
                tokens += cost
            push(event)
            since_yield += 1
            if since_yield >= _BATCH:
                flush()
                since_yield = 0
                await asyncio.sleep(0)
        else:
            if not await due_faults(True):
                terminal(ctx.status, ctx.error, ctx.incomplete_details)
    except asyncio.CancelledError:
        obj["status"] = "cancelled"
        obj["usage"] = usage(input_tokens, emitter.output_tokens, emitter.reasoning_tokens)
    except Exception:  # a bug in a plan must still end the stream the way the API would
        logger.exception("simulator plan crashed")
        terminal("failed", {"code": "server_error", "message": "The simulator crashed."})
    finally:
        flush()
        resp.finish()

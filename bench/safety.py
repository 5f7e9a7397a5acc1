"""The safety modes' cost: the latency `buffered` adds, and the CPU each mode costs per delta.

Latency: S concurrent streams of the simulator's text at a realistic pace (one word-ish token
per delta, `--pace` tokens/s), each through the relay's own pieces: the Transcript (with the
SafetyGate in front of its view unless `off`), SafetyChecks running the built-in rules checker
(20 rules that never match, so nothing stops), and a PatchStream throttled like the relay's
(RELAY_FLUSH_INTERVAL_MS 50) with one timer, as Delivery arms it. A delta's latency is from its
arrival at the relay (fed to the transcript) to the patch that carries it to viewers (the
publish call). Every mode runs in the same process, one after another, on the same text.

CPU: one long stream (20,000 deltas, 4 KiB chunks) fed as fast as possible, verdicts given at
once: what the gate costs per delta on top of `off` (the relay's hot path).

    python -m bench safety [--quick]     # prints the tables; without --quick writes bench/results/safety.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.harness import keep_notes

RESULTS = Path(__file__).resolve().parent / "results" / "safety.md"
RULES = [rf"\bforbidden{i}\s+phrase\b" for i in range(19)] + [r"kumquat\s+zeppelin"]
MODES = (("off", "sentence"), ("buffered", "sentence"), ("buffered", "paragraph"), ("progressive", "sentence"))
WINDOW_INTERVAL = 0.5  # RELAY_CHECKPOINT_INTERVAL_MS: a window is judged no later than this
FLUSH_INTERVAL = 0.05  # RELAY_FLUSH_INTERVAL_MS


def _django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("DJANGO_ENV", "development")
    import django

    django.setup()


def stream_events(tokens: list[str]) -> list[dict[str, Any]]:
    from bench.core import _ITEM_ID, _response

    seq = iter(range(10**9))
    text = "".join(tokens)
    where = {"item_id": _ITEM_ID, "output_index": 0, "content_index": 0}
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    item = {"id": _ITEM_ID, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
    done = dict(item, status="completed", content=[dict(part, text=text)])
    events: list[dict[str, Any]] = [
        {"type": "response.created", "sequence_number": next(seq), "response": _response("in_progress", [])},
        {"type": "response.output_item.added", "sequence_number": next(seq), "output_index": 0, "item": item},
        {"type": "response.content_part.added", "sequence_number": next(seq), **where, "part": part},
    ]
    events += [{"type": "response.output_text.delta", "sequence_number": next(seq), **where, "delta": token,
                "logprobs": []} for token in tokens]
    events += [
        {"type": "response.output_text.done", "sequence_number": next(seq), **where, "text": text, "logprobs": []},
        {"type": "response.content_part.done", "sequence_number": next(seq), **where, "part": dict(part, text=text)},
        {"type": "response.output_item.done", "sequence_number": next(seq), "output_index": 0, "item": done},
        {"type": "response.completed", "sequence_number": next(seq), "response": _response("completed", [done])},
    ]
    return events


def corpus(tokens: int, seed: int) -> list[str]:
    from responses_app.simulator import texts

    rng = random.Random(seed)
    return texts.tokenize(texts.truncate_tokens(texts.long_text(rng, tokens), tokens))


class Relay:
    """One stream's transcript, checks and patch stream, timed like Delivery (one timer)."""

    def __init__(self, mode: str, unit: str, latencies: list[float]) -> None:
        from responses_app.relay.gate_checks import SafetyChecks
        from responses_app.relay.patches import PatchStream
        from responses_app.safety.checkers import RulesChecker
        from responses_app.streaming.gate import SafetyGate
        from responses_app.streaming.transcript import Transcript

        self.loop = asyncio.get_running_loop()
        self.transcript = Transcript()
        self.checks = None
        if mode != "off":
            self.transcript.guard(SafetyGate(mode, unit=unit, max_chars=400, context_chars=200,
                                             interval=WINDOW_INTERVAL))

            async def record(rows: list[dict[str, Any]]) -> None:
                return None

            self.checks = SafetyChecks(uuid.uuid4(), mode, self.transcript, RulesChecker(RULES),
                                       changed=lambda change, urgent: self.changed(change, urgent),
                                       on_flag=lambda: None, timeout=2.0, fail_closed=mode == "buffered",
                                       record=record)
        self.patches = PatchStream(self.transcript.view, self.publish, FLUSH_INTERVAL)
        self.arrivals: list[tuple[int, float]] = []  # (text length after the delta, when it came)
        self.length = 0
        self.next = 0
        self.latencies = latencies
        self.timer: asyncio.TimerHandle | None = None

    def feed(self, chunk: bytes, delta: str) -> None:
        now = self.loop.time()
        if delta:
            self.length += len(delta)
            self.arrivals.append((self.length, now))
        step = self.transcript.feed(chunk, now)
        self.changed(step.change, step.boundary)

    def changed(self, change: Any, boundary: bool = False) -> None:
        if change.windows and self.checks is not None:
            self.checks.check(change.windows)
        now = self.loop.time()
        if self.patches.push(change, now, boundary=boundary):
            self.patches.flush(now)
        self.arm()

    def arm(self) -> None:
        gate = self.transcript.gate
        deadlines = [at for at in (self.patches.next_deadline(), gate.next_deadline() if gate else None)
                     if at is not None]
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if deadlines:
            self.timer = self.loop.call_at(min(deadlines), self.on_timer)

    def on_timer(self) -> None:
        self.timer = None
        now = self.loop.time()
        gate = self.transcript.gate
        if gate is not None and (at := gate.next_deadline()) is not None and at <= now:
            self.changed(self.transcript.safety_tick(now))
            return
        if self.patches.due(now):
            self.patches.flush(now)
        self.arm()

    def publish(self, message: dict[str, Any], text: str) -> None:
        now = self.loop.time()
        view = self.transcript.view
        shown = len(view.text("o0-c0")) if view.has("o0-c0") else 0
        while self.next < len(self.arrivals) and self.arrivals[self.next][0] <= shown:
            self.latencies.append(now - self.arrivals[self.next][1])
            self.next += 1

    async def end(self) -> None:
        if self.checks is not None:
            await self.checks.settle()
        self.changed(self.transcript.end("completed"), True)
        self.patches.flush(self.loop.time())
        if self.timer is not None:
            self.timer.cancel()


async def one_stream(mode: str, unit: str, events: list[dict[str, Any]], pace: float, latencies: list[float],
                     start: float) -> None:
    from bench.core import to_sse

    relay = Relay(mode, unit, latencies)
    loop = asyncio.get_running_loop()
    at = start
    for event in events:
        delta = event.get("delta", "") if event["type"] == "response.output_text.delta" else ""
        if delta:
            at += 1 / pace
            await asyncio.sleep(max(0.0, at - loop.time()))
        relay.feed(to_sse([event]), delta)
    await relay.end()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def latency(streams: int, tokens: int, pace: float) -> dict[tuple[str, str], list[float]]:
    results: dict[tuple[str, str], list[float]] = {}
    for mode, unit in MODES:
        latencies: list[float] = []
        loop = asyncio.get_running_loop()
        start = loop.time() + 0.05
        await asyncio.gather(*(one_stream(mode, unit, stream_events(corpus(tokens, seed)), pace, latencies,
                                          start + seed * 0.013) for seed in range(streams)))
        results[(mode, unit)] = latencies
    return results


def cpu(deltas: int) -> dict[str, float]:
    """Seconds per delta through Transcript (+ gate, verdicts at once), best of 3."""
    from bench.core import chunks_of, to_sse
    from responses_app.streaming.gate import SafetyGate
    from responses_app.streaming.transcript import Transcript

    data = to_sse(stream_events(corpus(deltas, 1)))
    chunks = chunks_of(data)
    out = {}
    for mode in ("off", "progressive", "buffered"):
        best = float("inf")
        for _ in range(3):
            transcript = Transcript()
            if mode != "off":
                transcript.guard(SafetyGate(mode))
            started = time.perf_counter()
            for index, chunk in enumerate(chunks):
                change = transcript.feed(chunk, index * 0.01).change
                for window in change.windows:
                    transcript.safety_verdict(window.id, False)
            transcript.end("completed")
            best = min(best, time.perf_counter() - started)
        out[mode] = best / deltas
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench safety")
    parser.add_argument("--quick", action="store_true", help="fewer, shorter streams; no results file")
    parser.add_argument("--pace", type=float, default=50.0, help="tokens per second of each stream (50)")
    args = parser.parse_args(argv)
    quick, pace = args.quick, args.pace
    streams, tokens, deltas = (5, 150, 5000) if quick else (20, 400, 20000)
    _django()
    results = asyncio.run(latency(streams, tokens, pace))
    costs = cpu(deltas)
    off = results[("off", "sentence")]
    lines = [
        "# Safety modes: added latency and CPU", "",
        f"`python -m bench safety{' --quick' if quick else ''}` on {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs ({sys.platform}), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
        f"Latency: {streams} concurrent streams x {tokens} tokens of the simulator's text at {pace:g} tokens/s, "
        f"rules checker ({len(RULES)} rules, none matching), windows of at most 400 chars judged no later than "
        f"{WINDOW_INTERVAL * 1000:g} ms after their first character, patches throttled at "
        f"{FLUSH_INTERVAL * 1000:g} ms. From a delta's arrival at the relay to the patch that carries it.", "",
        "| mode | window | p50 | p99 | max | added p50 | added p99 |", "|---|---|---|---|---|---|---|",
    ]
    for (mode, unit), values in results.items():
        p50, p99 = pct(values, 0.5), pct(values, 0.99)
        lines.append(
            f"| {mode} | {unit if mode != 'off' else '-'} | {p50 * 1000:.0f} ms | {p99 * 1000:.0f} ms | "
            f"{max(values) * 1000:.0f} ms | {(p50 - pct(off, 0.5)) * 1000:+.0f} ms | "
            f"{(p99 - pct(off, 0.99)) * 1000:+.0f} ms |")
    lines += [
        "", f"CPU per delta (one {deltas}-delta stream, 4 KiB chunks, the gate and its windows; the checks "
        "themselves not counted), best of 3:", "", "| mode | µs per delta | vs off |", "|---|---|---|",
    ]
    for mode, seconds in costs.items():
        lines.append(f"| {mode} | {seconds * 1e6:.2f} | {seconds / costs['off']:.2f}x |")
    lines += ["", "`off` builds no gate: the transcript's view is the assembler's, as before the safety modes."]
    text = "\n".join(lines) + "\n"
    print(text)
    if not quick:  # the notes under the tables stay
        RESULTS.write_text(keep_notes(RESULTS, text))
    return 0

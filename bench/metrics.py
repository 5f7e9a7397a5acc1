"""What the live metrics cost the relay's hot path, side by side in one run.

The same generated stream (bench/core.py's, one event per chunk as paced upstreams deliver them)
goes through the relay shell's per-event work: the core (Transcript.feed), the patch stream
(responses_app/relay/patches.py) flushed every K events as the 50 ms interval would, two viewers
per patch (the offer and send of viewers/cursor.py and sender.py) and a checkpoint every 64
events. *before*: patches.py as it was before the metrics (read from git `main`), no stamps, no
observations. *after*: today's patches.py, the consumer's lag probe, `relay_patch_lag_seconds`
observed per patch and viewer, the event counters' deltas at each checkpoint. Both in-process
(one registry) and with PROMETHEUS_MULTIPROC_DIR (values in mmapped files), the latter in a
subprocess because prometheus_client chooses its value store at import.

    python -m bench metrics        # prints the table and writes bench/results/metrics.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types
from collections import deque
from pathlib import Path
from typing import Any

from bench.harness import keep_notes

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "metrics.md"
DELTAS = 20_000
CHECKPOINT_EVERY = 64
VIEWERS = 2
REPEATS = 7
PACES = (30, 200, 1000)  # events a second: a paced answer, a fast one, a burst


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()


def _old_patches() -> Any:
    """patches.py before the metrics, from git, as a module of its own."""
    source = subprocess.run(["git", "show", "main:responses_app/relay/patches.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    if "ARRIVED" in source:
        raise SystemExit("main's patches.py already has the metrics: compare against an older commit")
    module = types.ModuleType("responses_app.relay._patches_before")
    module.__package__ = "responses_app.relay"
    exec(compile(source, "patches_before.py", "exec"), module.__dict__)  # noqa: S102
    return module


class Viewer:
    """The offer and send (viewers/cursor.py, sender.py), with or without the lag probe."""

    __slots__ = ("outbox", "probe", "probe_at", "sent", "metrics")

    def __init__(self, metrics: Any) -> None:
        self.outbox: deque[str] = deque()
        self.probe: str | None = None
        self.probe_at = 0.0
        self.sent = 0
        self.metrics = metrics

    def offer(self, message: dict[str, Any], text: str) -> None:
        self.outbox.append(text)
        if self.metrics is not None and self.metrics.ARRIVED in message:
            self.probe, self.probe_at = text, message[self.metrics.ARRIVED]

    def drain(self) -> None:
        while self.outbox:
            text = self.outbox.popleft()
            self.sent += len(text)  # stands for the ASGI send
            if self.metrics is not None and text is self.probe:
                self.probe = None
                self.metrics.patch_sent(self.probe_at)


def one_run(patches_module: Any, with_metrics: bool, chunks: list[bytes], pace: float) -> tuple[float, int]:
    """`pace` events a second of simulated time: a patch every 50 ms of it (or at a boundary)."""
    from responses_app.ops import metrics
    from responses_app.streaming.transcript import Transcript

    transcript = Transcript(max_event_bytes=8 << 20, hold_window=8)
    viewers = [Viewer(metrics if with_metrics else None) for _ in range(VIEWERS)]

    def publish(message: dict[str, Any], text: str) -> None:
        message.get(metrics.ARRIVED)  # Hub.publish hands the stamp to the fan-out
        for viewer in viewers:
            viewer.offer(message, text)

    stream = patches_module.PatchStream(transcript.view, publish, 0.05)
    tally = metrics.StreamTally()
    events = since_checkpoint = 0
    started = time.perf_counter()
    now = flushed = 0.0
    for chunk in chunks:
        step = transcript.feed(chunk)
        n = len(step.events)
        events += n
        since_checkpoint += n
        now += n / pace
        stream.push(step.change, now, boundary=step.boundary)
        if now - flushed >= 0.05 or step.boundary:
            flushed = now
            stream.flush(now)
            for viewer in viewers:
                viewer.drain()
        if since_checkpoint >= CHECKPOINT_EVERY:
            since_checkpoint = 0
            if with_metrics:
                tally.report(transcript.counters())
    return time.perf_counter() - started, events


def per_call() -> dict[str, float]:
    """ns per call of each hook, best of REPEATS tight loops: steadier than the A/B on a busy machine."""
    import timeit

    from bench.core import make_stream
    from responses_app.ops import metrics
    from responses_app.streaming.transcript import Transcript

    transcript = Transcript(max_event_bytes=8 << 20, hold_window=8)
    body, _ = make_stream(200)
    transcript.feed(body)
    tally = metrics.StreamTally()
    counters = transcript.counters()
    stamp = time.time()
    hooks = {
        "patch lag observation (metrics.patch_sent)": lambda: metrics.patch_sent(stamp),
        "event counters at a checkpoint (StreamTally.report + Transcript.counters)":
            lambda: tally.report(transcript.counters()),
        "a counter's inc": metrics.CANCELS.inc,
        "a gauge's inc": metrics.VIEWERS.inc,
        "the stamp (time.time)": time.time,
        "the push's check (no stamp due)": lambda: 0.0 >= 1.0 and counters is None,
    }
    number = 20_000
    return {name: min(timeit.repeat(fn, number=number, repeat=REPEATS)) / number * 1e9 for name, fn in hooks.items()}


def measure() -> dict[str, Any]:
    """Best-of-REPEATS µs per event, before and after, at a few paces, alternately."""
    _setup()
    import gc

    from bench.core import make_stream
    from responses_app.relay import patches as patches_after

    body, _ = make_stream(DELTAS)
    blocks = [block + b"\n\n" for block in body.split(b"\n\n") if block.strip()]  # one event per chunk
    before = _old_patches()
    rows = {}
    for pace in PACES:
        best = {"before": float("inf"), "after": float("inf")}
        counted = 0
        for _ in range(REPEATS):
            for name, module, on in (("before", before, False), ("after", patches_after, True)):
                gc.collect()
                seconds, counted = one_run(module, on, blocks, pace)
                best[name] = min(best[name], seconds)
        rows[pace] = {k: v / counted * 1e6 for k, v in best.items()}
    return {"rows": rows, "calls": per_call(), "multiprocess": bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))}


def render_calls(results: list[dict[str, Any]]) -> str:
    from responses_app.ops.metrics import PATCH_LAG_SAMPLE_S

    single, multi = (r["calls"] for r in results)
    lines = ["| hook | ns per call, one process | ns per call, multiprocess |", "|---|---:|---:|"]
    lines += [f"| {name} | {single[name]:.0f} | {multi[name]:.0f} |" for name in single]
    lines += ["", "| per event, computed from these | one process | multiprocess |", "|---|---:|---:|"]
    observe = "patch lag observation (metrics.patch_sent)"
    tally = "event counters at a checkpoint (StreamTally.report + Transcript.counters)"
    for pace in PACES:
        cells = []
        for calls in (single, multi):
            per_sample = calls["the stamp (time.time)"] + VIEWERS * calls[observe]
            ns = (per_sample / (pace * PATCH_LAG_SAMPLE_S) + calls[tally] / CHECKPOINT_EVERY
                  + calls["the push's check (no stamp due)"])
            cells.append(f"{ns / 1000:.3f} µs")
        lines.append(f"| {pace} events/s, {VIEWERS} viewers | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def render(results: list[dict[str, Any]]) -> str:
    lines = ["| metrics store | events/s | before µs/event | after µs/event | added µs/event | added |",
             "|---|---:|---:|---:|---:|---:|"]
    for result in results:
        store = "multiprocess (mmap files)" if result["multiprocess"] else "one process"
        for pace, row in result["rows"].items():
            added = row["after"] - row["before"]
            lines.append(f"| {store} | {pace} | {row['before']:.2f} | {row['after']:.2f} | {added:+.2f} | "
                         f"{added / row['before'] * 100:+.1f}% |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench metrics")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one store's measurement
    if parser.parse_args(argv).child:
        print(json.dumps(measure()))
        return 0
    results = []
    with tempfile.TemporaryDirectory() as directory:
        for extra in ({}, {"PROMETHEUS_MULTIPROC_DIR": directory}):
            env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
            env.update(DJANGO_ENV="development", **extra)
            out = subprocess.run([sys.executable, "-m", "bench", "metrics", "--child"], cwd=ROOT, env=env,
                                 check=True, capture_output=True, text=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            result["rows"] = {int(float(k)): v for k, v in result["rows"].items()}
            results.append(result)
    table = render(results) + "\n\nThe hooks alone, per call, and what they add per event at each pace:\n\n" \
        + render_calls(results)
    print(table)
    RESULTS.write_text(keep_notes(RESULTS,
        "# What the live metrics cost the hot path\n\n"
        "Generated by `python -m bench metrics` (bench/metrics.py): the relay shell's per-event work on\n"
        f"a generated stream of {DELTAS:,} text deltas, one event per chunk, {VIEWERS} viewers, a checkpoint\n"
        f"every {CHECKPOINT_EVERY} events; best of {REPEATS}, before and after alternately in one run.\n"
        "*before* is patches.py from `main` without stamps or observations; *after* adds the patch stamp,\n"
        "the consumer's lag probe, one `relay_patch_lag_seconds` observation per stamped patch and viewer,\n"
        "and the event counters' deltas per checkpoint. Time is simulated at each pace: a patch every 50 ms\n"
        "of it (about 1.5 events per patch at 30/s, 50 at 1,000/s), one stamped patch per 250 ms.\n\n"
        + table + "\n"))
    return 0

"""`python -m bench chaos --minutes M --streams N`: the scaled-out layout under a schedule of faults,
every request checked against its invariants (bench/README.md, "Chaos run").

bench/cluster.py starts the layout; traffic.py keeps N requests in flight and checks each as it
ends; faults.py carries out schedule.py's faults; sampler.py watches memory and connections;
checks.py makes the checks that need every request; report.py writes the report. Exits 1 when any
invariant lost anything.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

from bench.chaos import checks, report, schedule
from bench.chaos.faults import Injector
from bench.chaos.report import Result
from bench.chaos.sampler import Sampler, durability
from bench.chaos.tools import PATHS
from bench.chaos.traffic import Traffic
from bench.cluster import Cluster, have_services
from bench.harness import ROOT

MIX = {"tools": 0.12, "drop": 0.10, "429": 0.04}
DRAIN_S = 240.0  # after the load: every request still in flight must end within this


async def _run(cluster: Cluster, *, minutes: float, streams: int, seed: int, tokens: tuple[int, int],
               tokens_per_s: float, faults: list[schedule.Fault], tool_log: Path) -> tuple[Traffic, Injector, Sampler]:
    t0 = time.time()
    traffic = Traffic(cluster, streams=streams, seconds=minutes * 60, seed=seed, tokens=tokens,
                      tokens_per_s=tokens_per_s, mix=MIX)
    injector, sampler = Injector(cluster, t0), Sampler(cluster, t0)
    stop = asyncio.Event()
    background = [asyncio.create_task(injector.run(faults, stop)), asyncio.create_task(sampler.run(stop)),
                  asyncio.create_task(sampler.watch_lag(stop))]
    progress = asyncio.create_task(_progress(traffic, t0, stop))
    try:
        await asyncio.wait_for(traffic.run_loop(t0), minutes * 60 + DRAIN_S)
    finally:
        stop.set()
        await asyncio.gather(*background, progress, return_exceptions=True)
    return traffic, injector, sampler


async def _progress(traffic: Traffic, t0: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 30)
        except TimeoutError:
            bad = sum(1 for d in traffic.done if d.violations)
            print(f"[{time.time() - t0:7.1f} s] {len(traffic.done)} ended, {traffic.in_flight} in flight, "
                  f"{bad} with a violation", flush=True)


def run(*, minutes: float, streams: int, seed: int = 1, tokens: tuple[int, int] = (150, 600),
        tokens_per_s: float = 30.0, command: str = "", keep_logs: Path | None = None, only: str = "") -> Result:
    missing = have_services()
    if missing:
        raise RuntimeError(missing)
    faults = (schedule.only(schedule.ONLY[only], minutes, seed, workers=2) if only
              else schedule.build(minutes, seed, workers=2))
    print("fault schedule (seconds from the start of the load):", *faults, sep="\n  ", flush=True)
    tool_log = Path(tempfile.mkdtemp(prefix="relay-chaos-")) / "tools.jsonl"
    cluster = Cluster(layout="scaled", web=2, workers=2, keep_logs=keep_logs,
                      env={"RELAY_TOOLS": PATHS, "CHAOS_TOOL_LOG": str(tool_log)})
    load_start = os.getloadavg()
    started = time.monotonic()
    cluster.start()
    try:
        traffic, injector, sampler = asyncio.run(_run(
            cluster, minutes=minutes, streams=streams, seed=seed, tokens=tokens, tokens_per_s=tokens_per_s,
            faults=faults, tool_log=tool_log))
        cluster.ensure_running()
        done = traffic.done
        counted = checks.counted_once(cluster, done)
        tools = checks.tools_once(cluster, done, tool_log)
        checks.event_logs_whole(cluster, done)
        warmup = max(schedule.WARMUP_MIN_S, schedule.WARMUP * minutes * 60)
        result = Result(command=command, minutes=minutes, streams=streams, seed=seed, faults=faults,
                        windows=injector.windows, done=done, samples=sampler.samples,
                        flatness=sampler.flatness(warmup), cpu=sampler.cpu_use(), lags=sampler.lags, late=sampler.late,
                        durability=durability(cluster), counted=counted,
                        tools=tools, injector_errors=injector.errors, load=(load_start, os.getloadavg()),
                        wall_s=time.monotonic() - started, t0=traffic.t0)
        result.tally()
        return result
    finally:
        cluster.close()
        tool_log.unlink(missing_ok=True)
        tool_log.parent.rmdir()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--streams", type=int, default=30, help="requests in flight at all times")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tokens", default="150,600", help="a request's answer length, min,max tokens")
    parser.add_argument("--tokens-per-s", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "chaos.md")
    parser.add_argument("--no-readme", action="store_true", help="leave bench/README.md's summary as it is")
    parser.add_argument("--keep-logs", type=Path, help="copy every process's log here")
    parser.add_argument("--only", choices=sorted(schedule.ONLY),
                        help=f"one kind of fault, every {schedule.ONLY_EVERY_S:g} s: to study its pauses")
    args = parser.parse_args(argv)
    low, high = (int(x) for x in args.tokens.split(","))
    command = "python -m bench chaos " + shlex.join(argv)
    result = run(minutes=args.minutes, streams=args.streams, seed=args.seed, tokens=(low, high),
                 tokens_per_s=args.tokens_per_s, command=command.strip(), keep_logs=args.keep_logs,
                 only=args.only or "")
    report.write(result, args.out, None if args.no_readme else ROOT / "bench" / "README.md")
    for name, (lost, total) in result.lost.items():
        print(f"{name:10} lost {lost}/{total}")
    print(f"report: {args.out}")
    return 1 if result.failed() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`python -m bench scaled`: N concurrent requests with M viewers each, on one process (the
embedded defaults) and scaled out (P web processes, `python -m project.serve`, + W runworkers on
PostgreSQL + Redis).

    python -m bench scaled                           # 20 and 50 streams, both layouts; writes results
    python -m bench scaled --streams 20,50,100,200   # more steps
    python -m bench scaled --quick                   # 5 streams, short; results not written

Every process runs on loopback (bench/cluster.py starts them; private Redis and PostgreSQL, so
nothing shared is touched), every run is bounded by --deadline. Per step it reports completed
streams, p50/p99 lag (viewer receipt minus the simulator's emit stamp of the newest delta in a
patch), viewers that ended behind the committed final view (must be 0), resyncs (snapshots asked
for on a gap), CPU per process (share of one core over the step) and the peak of database
connections (pg_stat_activity, by process). Results go to bench/results/scaled.md and a plot of
lag against streams to bench/results/scaled_lag.png.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import platform
import threading
import time
from pathlib import Path
from typing import Any

from bench.cluster import Cluster
from bench.harness import fmt_ms, keep_notes
from bench.viewers import Load

RESULTS = Path(__file__).resolve().parent / "results"


def step(cluster: Cluster, streams: int, args: argparse.Namespace) -> dict[str, Any]:
    restarted = cluster.ensure_running()
    load = Load(ports=cluster.web_ports(), session=cluster.session, streams=streams, viewers=args.viewers,
                tokens=args.tokens, tokens_per_s=args.tps, deadline_s=args.deadline, seed=streams * 1000)
    peaks: dict[str, int] = {}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(1.0):
            if cluster.postgres is None:
                return
            try:
                counts = cluster.postgres.connections()
            except Exception:
                continue
            for name, count in counts.items():
                peaks[name] = max(peaks.get(name, 0), count)
            peaks["total"] = max(peaks.get("total", 0), sum(counts.values()))

    sampler = threading.Thread(target=sample, daemon=True)
    cpu0, t0 = cluster.cpu(), time.monotonic()
    sampler.start()
    try:
        asyncio.run(load.run())
    finally:
        stop.set()
        sampler.join()
    elapsed = time.monotonic() - t0
    cpu1 = cluster.cpu()
    cpu = {name: (cpu1[name] - cpu0[name]) / elapsed for name in cpu1 if name in cpu0}
    result = load.summary() | {"layout": cluster.layout, "elapsed_s": elapsed, "cpu": cpu, "connections": peaks,
                               "restarted_before": restarted,
                               "died": [s.name for s in cluster.servers.values() if not s.alive()]}
    print(f"  {cluster.layout} {streams:>4} streams: completed {result['completed']}/{streams}, "
          f"lag p50 {fmt_ms(result['lag_p50_ms'])} p99 {fmt_ms(result['lag_p99_ms'])} ms, "
          f"behind {result['behind']}, no terminal {result['no_terminal']}, resyncs {result['resyncs']}, "
          f"connections {peaks.get('total', '–')}, died {result['died']}\n    cpu {_cpu_cell(cpu)}", flush=True)
    return result


def run_layout(layout: str, steps: list[int], args: argparse.Namespace) -> list[dict[str, Any]]:
    cluster = Cluster(layout=layout, web=args.web, workers=args.workers,
                      keep_logs=Path(args.keep_logs) / layout if args.keep_logs else None).start()
    try:
        return [step(cluster, streams, args) for streams in steps]
    finally:
        cluster.close()


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for layout, colour in (("embedded", "tab:blue"), ("scaled", "tab:orange")):
        mine = [r for r in rows if r["layout"] == layout and not math.isnan(r["lag_p50_ms"])]
        if not mine:
            continue
        xs = [r["streams"] for r in mine]
        label = "1 process (embedded)" if layout == "embedded" else "2 web + 2 workers (PostgreSQL, Redis)"
        ax.plot(xs, [r["lag_p50_ms"] for r in mine], "o-", color=colour, label=f"{label}: p50")
        ax.plot(xs, [r["lag_p99_ms"] for r in mine], "s--", color=colour, label=f"{label}: p99")
    ax.set_xlabel("concurrent streams (2 viewers each)")
    ax.set_ylabel("lag, simulator emit to viewer (ms)")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Viewer lag against streams")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _cpu_cell(cpu: dict[str, float]) -> str:
    return ", ".join(f"{name} {value * 100:.0f}%" for name, value in sorted(cpu.items()))


def _conn_cell(peaks: dict[str, int]) -> str:
    if not peaks:
        return "– (SQLite)"
    parts = [f"{name} {count}" for name, count in sorted(peaks.items()) if name != "total"]
    return f"**{peaks.get('total', 0)}** ({', '.join(parts)})"


def write(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    lines = [
        "# Scaled-out load (`python -m bench scaled`)",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} cores shared with other work; Python "
        f"{platform.python_version()}. Each step: N requests (`sim-long`, {args.tokens} tokens at {args.tps:g} "
        f"tokens/s, so ~{args.tokens / args.tps:.0f} s each) with {args.viewers} websocket viewers each, request i "
        "submitted through web process i % P and watched through processes (i + j) % P; bounded by "
        f"{args.deadline:.0f} s. Viewers, load and all servers share the same cores.",
        "",
        "Layouts: **embedded** is `make run`'s: one `project.serve` process (uvicorn), SQLite, the "
        "in-memory channel layer, the "
        f"in-process runner and the simulator mounted on it. **scaled** is {args.web} `project.serve` web processes "
        f"(RELAY_INPROCESS_RUNNER=false) + {args.workers} `relayworker`, a private PostgreSQL 15 and "
        "Redis, the standalone simulator; settings as shipped (pool, Redis timeouts, layer capacity).",
        "",
        "| layout | streams | completed | lag p50 / p99 (ms) | behind final view | no terminal | resyncs | "
        "snapshots | CPU per process (one core = 100%) | DB connections, peak | died |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['layout']} | {r['streams']} | {r['completed']}/{r['streams']} | "
                     f"{fmt_ms(r['lag_p50_ms'])} / {fmt_ms(r['lag_p99_ms'])} | {r['behind']} | {r['no_terminal']} | "
                     f"{r['resyncs']} | {r['snapshots']} | {_cpu_cell(r['cpu'])} | {_conn_cell(r['connections'])} | "
                     f"{', '.join(r['died']) or '–'} |")
    lines += ["", "![lag against streams](scaled_lag.png)", ""]
    problems = [r for r in rows if r["behind"] or r["completed"] < r["streams"] or r["died"] or r["no_terminal"]]
    if problems:
        lines += ["## What failed", ""]
        for r in problems:
            lines.append(f"- {r['layout']} at {r['streams']} streams: statuses {sorted(set(r['statuses']))}, "
                         f"{r['behind']} viewers behind, {r['no_terminal']} without terminal, died {r['died']}; "
                         f"viewer errors {r['viewer_errors']}, submit errors {r['submit_errors']}")
        lines.append("")
    path = RESULTS / "scaled.md"
    path.write_text(keep_notes(path, "\n".join(lines) + "\n"))
    plot(rows, RESULTS / "scaled_lag.png")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench scaled")
    parser.add_argument("--streams", default="20,50", help="comma-separated steps")
    parser.add_argument("--layouts", default="embedded,scaled")
    parser.add_argument("--viewers", type=int, default=2)
    parser.add_argument("--web", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--tps", type=float, default=30.0)
    parser.add_argument("--deadline", type=float, default=120.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--keep-logs", default="", help="copy every process's log to this directory")
    args = parser.parse_args(argv)
    steps = [int(s) for s in args.streams.split(",")]
    if args.quick:
        steps, args.tokens, args.deadline = [5], 60, 40.0
    rows: list[dict[str, Any]] = []
    for layout in args.layouts.split(","):
        print(f"== {layout}", flush=True)
        rows += run_layout(layout, steps, args)
    if not (args.quick or args.no_write):
        write(rows, args)
        print(f"wrote {RESULTS / 'scaled.md'} and {RESULTS / 'scaled_lag.png'}")
    failed = any(r["behind"] or r["completed"] < r["streams"] for r in rows)
    return 1 if failed else 0

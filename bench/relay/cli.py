"""`python -m bench relay [options]`: the options, the run, the results file; and the roles the run
starts in processes of their own (`python -m bench.relay --role ROLE --config JSON`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import ASGI_SERVERS, ROOT, environment, keep_notes, reachable
from bench.relay import plan as plans
from bench.relay.report import header, render
from bench.relay.run import RESULTS, run


def role_main(role: str, cfg: dict[str, Any]) -> None:
    """Run one role in this process and print its result as the last line of JSON."""
    if role == "load":
        from bench.relay.load import load

        result = asyncio.run(load(cfg))
    elif role == "loadpart":
        from bench.relay.loadgen import run as loadpart

        result = loadpart(cfg)
    elif role == "floor":
        from bench.relay.cpu import floor

        if cfg.get("loop") == "uvloop":
            import uvloop

            result = uvloop.run(floor(cfg))
        else:
            result = asyncio.run(floor(cfg))
    else:
        from bench.probe import setup_django
        from bench.relay.writes import writes

        setup_django(cfg)
        result = asyncio.run(writes(cfg))
    print(json.dumps(result))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench relay")
    p.add_argument("--quick", action="store_true", help="a smoke run; does not write the results file")
    p.add_argument("--steps", default="", help="comma-separated stream counts")
    p.add_argument("--window", type=float, default=0)
    p.add_argument("--sqlite", action="store_true", help="a temp SQLite file instead of PostgreSQL")
    p.add_argument("--only", default="", help="comma-separated sections: latency,cpu,capacity,writes "
                   "(memory per stream: python -m bench storage --only memory)")
    p.add_argument("--cpu-streams", type=int, default=0, help="streams in the CPU section (100)")
    p.add_argument("--asgi", default="", help=f"ASGI servers to measure ours on too: {','.join(ASGI_SERVERS)}")
    p.add_argument("--targets", default="ours,naive", help="the capacity section's relays")
    p.add_argument("--cpu-rounds", type=int, default=1, help="rounds of the CPU section's servers, alternated")
    p.add_argument("--server", default="", help="the ASGI server ours runs on")
    p.add_argument("--baseline-server", default="", help="the ASGI server the baseline runs on")
    p.add_argument("--baseline-env", action="append", default=[], metavar="NAME=VALUE",
                   help="set in the baseline's environment: `--baseline . --baseline-env RELAY_COMPILED=false` "
                        "measures this tree interpreted beside it compiled")
    p.add_argument("--profile", action="store_true", help="py-spy our server under the CPU section's load")
    p.add_argument("--baseline", default="", help="another checkout whose server the CPU section measures too")
    p.add_argument("--loadgen", choices=("loop", "tasks"), default="loop",
                   help="load generator: one receive loop per process (default) or the previous task per socket")
    p.add_argument("--load-procs", type=int, default=2, help="load processes per step (--loadgen loop)")
    p.add_argument("--gc-log", action="store_true", help="log our server's garbage collections over 5 ms")
    p.add_argument("--burst", action="store_true",
                   help="after each step's ramp-up, one more socket per stream, opened at once (first view)")
    p.add_argument("--flush-as-stamped", action="store_true",
                   help="ours with RELAY_FLUSH_MIN_CHARS's default, though the stamps make each delta several "
                        "times longer (fewer deltas a patch than for the text unstamped), as earlier runs")
    p.add_argument("--role", help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)
    return p


def plan_from(args: argparse.Namespace) -> plans.Plan:
    plan = plans.quick() if args.quick else plans.full()
    if args.steps:
        plan.steps = [int(s) for s in args.steps.split(",")]
    if args.window:
        plan.window = args.window
    if args.only:
        plan.sections = tuple(args.only.split(","))
    if args.cpu_streams:
        plan.cpu_streams = args.cpu_streams
    plan.baseline = args.baseline
    plan.baseline_env = dict(pair.split("=", 1) for pair in args.baseline_env)
    plan.burst = args.burst
    plan.profile = args.profile
    plan.flush_as_stamped = args.flush_as_stamped
    plan.loadgen, plan.load_procs, plan.gc_log = args.loadgen, args.load_procs, args.gc_log
    plan.asgi = tuple(a for a in args.asgi.split(",") if a)
    plan.cpu_rounds = args.cpu_rounds
    plan.targets = tuple(args.targets.split(","))
    plan.server = args.server or plan.server
    plan.baseline_server = args.baseline_server or plan.baseline_server
    return plan


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.role:
        role_main(args.role, json.loads(args.config))
        return 0
    plan = plan_from(args)
    use_postgres = not args.sqlite and reachable(5432)
    log_dir = Path(tempfile.mkdtemp(prefix="relay-bench-logs-"))
    print(environment(), flush=True)
    res = run(plan, use_postgres, log_dir)
    (log_dir / "results.json").write_text(json.dumps(res, default=str))
    print(f"raw results: {log_dir / 'results.json'}", flush=True)
    table = render(res, plan)
    print()
    print(table)
    if not args.quick and not args.steps and not args.only:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        # The notes under the generated tables (level-2 headings: investigations, side-by-side runs
        # of one section) stay; a run replaces only what it generates.
        RESULTS.write_text(keep_notes(RESULTS, header(res, plan, environment()) + table + "\n", marker="\n## "))
        print(f"\nwrote {RESULTS.relative_to(ROOT)}")
    return 0

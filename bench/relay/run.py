"""One run of the relay benchmark: the processes it starts and the sections it measures, in order.

`run(plan, ...)` starts the simulator, our relay server, the naive relay and (for the CPU section)
the bare relay, each on a database of its own where it has one; then runs the plan's sections:
latency, CPU, capacity, database writes. Each step of a section starts a load coordinator
(`--role load`, bench/relay/load.py) against one server; the CPU section's floor is a role of its
own (`--role floor`, bench/relay/cpu.py) and the writes section runs probes in Django processes
(`--role writes`, bench/relay/writes.py). Every process is killed at the end, whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.harness import (
    PG,
    ROOT,
    Procs,
    base_env,
    database,
    django_env,
    make_session,
    migrate,
    pct,
    run_role,
    start_server,
    start_simulator,
    wait_idle,
)
from bench.relay import report
from bench.relay.cpu import VIEWERS
from bench.relay.plan import LAG_LIMIT_MS, Plan
from bench.stamps import FLUSH_MIN_CHARS, stamped_min_chars

RESULTS = ROOT / "bench" / "results" / "relay.md"
ROLES = "bench.relay"  # `python -m bench.relay --role ROLE`


def plain_chars_per_delta(sim_url: str, tokens: int = 2000) -> float:
    """The mean characters of a `sim-long` text delta without its stamp (one unpaced answer)."""
    import httpx
    import orjson

    from responses_app.simulator.auth import DEV_API_KEY

    body = {"model": "sim-long", "input": "Tell me something long.", "stream": True,
            "metadata": {"sim.tokens_per_s": "0", "sim.tokens": str(tokens), "sim.seed": "7"}}
    chars = deltas = 0
    with httpx.stream("POST", f"{sim_url}/responses", content=orjson.dumps(body), timeout=60,
                      headers={"content-type": "application/json", "authorization": f"Bearer {DEV_API_KEY}"}) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and '"response.output_text.delta"' in line:
                chars += len(orjson.loads(line[6:])["delta"])
                deltas += 1
    return chars / deltas if deltas else float("nan")


def to_created(db_url: str, since: float) -> dict[str, Any]:
    """Each request of a step, from its creation to the upstream's response.created (its start
    message, the lease, the POST upstream): whether a created request started at once."""
    if not db_url.startswith("postgres"):
        return {}
    import psycopg

    with psycopg.connect(dbname=db_url.rsplit("/", 1)[1], **PG) as conn:  # type: ignore[arg-type]
        rows = conn.execute("SELECT EXTRACT(EPOCH FROM upstream_created_at - created) FROM "
                            "responses_app_responserequest WHERE created >= to_timestamp(%s)", (since,)).fetchall()
    waits = [float(r[0]) for r in rows if r[0] is not None]
    return {"requests": len(rows), "never": len(rows) - len(waits), "p50": pct(waits, 50), "p99": pct(waits, 99),
            "max": max(waits, default=float("nan"))}


class RelayRun:
    """The run's processes and results; a method per section."""

    def __init__(self, plan: Plan, use_postgres: bool, log_dir: Path, databases: contextlib.ExitStack) -> None:
        self.plan, self.use_postgres, self.log_dir, self.databases = plan, use_postgres, log_dir, databases
        self.procs = Procs()
        self.results: dict[str, Any] = {"latency": {}, "capacity": {"ours": [], "naive": []}, "writes": [],
                                        "cpu": {"rows": [], "floor": []}}
        self.base_env = base_env(PYTHONUNBUFFERED="1")
        self.tokens = int(plan.tokens_per_s * 120)  # lasts far beyond any step; every step stops its streams
        self.servers: dict[str, tuple[subprocess.Popen[Any], int]] = {}  # target: (process, port)
        self.sessions: dict[str, str] = {}
        self.db_urls: dict[str, str] = {}

    def start(self, db_url: str) -> None:
        """The simulator, ours, the naive relay and (for the CPU section) the bare relay."""
        plan, log_dir = self.plan, self.log_dir
        self.sim, self.sim_url = start_simulator(self.procs, self.base_env)
        # Every relay of ours (and the baseline) waits for as many more characters as the stamps
        # add, so its patches carry as many deltas as for the same text unstamped (bench/stamps.py);
        # `--flush-as-stamped` keeps the default, as earlier runs measured.
        plain = plain_chars_per_delta(self.sim_url)
        min_chars = FLUSH_MIN_CHARS if plan.flush_as_stamped else stamped_min_chars(plain)
        self.results["flush"] = {"plain_chars_per_delta": plain, "min_chars": min_chars}
        self.relay_flush = {"RELAY_FLUSH_MIN_CHARS": str(min_chars)}
        self.env = django_env(self.base_env, db_url, self.sim_url)
        migrate(self.env)
        ours_env = self.own_database(ROOT)
        self.session = make_session(ours_env)
        self.server_env = dict(ours_env, **self.relay_flush)
        if plan.gc_log:  # the GC probe (bench/gcprobe) in our server only
            self.server_env = dict(self.server_env, RELAY_BENCH_GC_LOG=str(log_dir / "gc.log"),
                                   PYTHONPATH=os.pathsep.join([str(ROOT / "bench" / "gcprobe"),
                                                               self.env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
            self.results["gc_log"] = str(log_dir / "gc.log")
        self.servers["ours"] = start_server(self.procs, "project.asgi:application", self.server_env,
                                            log_dir / "ours.log", server=plan.server)
        naive_env = dict(self.base_env, NAIVE_UPSTREAM=self.sim_url)
        # The bare relay sends at least as many frames as ours (bench/relay/bare.py).
        bare_env = dict(naive_env, BARE_DELTAS_PER_FRAME="2") if plan.flush_as_stamped else naive_env
        self.servers["naive"] = start_server(self.procs, "bench.relay.naive:application", naive_env,
                                             log_dir / "naive.log")
        if "cpu" in plan.sections:  # the lower bound of the CPU section
            self.servers["bare"] = start_server(self.procs, "bench.relay.bare:application", bare_env,
                                                log_dir / "bare.log", server="uvicorn+websockets-sansio+uvloop")
        self.sessions["ours"] = self.session
        self.db_urls["ours"] = ours_env["DATABASE_URL"]

    def own_database(self, cwd: Path) -> dict[str, str]:
        """Every relay server a database of its own, ours too: with the in-memory layer a server's
        sweep would otherwise take another's late requests and stream them where their viewers
        never hear of them; and the run's first database reads high (bench/README.md, "The CPU
        section's own costs")."""
        extra_env = dict(self.env, DATABASE_URL=self.databases.enter_context(database(self.use_postgres))[0])
        migrate(extra_env, cwd)
        return extra_env

    def start_extra(self, target: str) -> None:
        """A server the CPU section compares ours with, one at a time (each holds a database pool)."""
        plan, log_dir = self.plan, self.log_dir
        if target == "before":
            before_env = {**self.own_database(Path(plan.baseline)), **self.relay_flush, **plan.baseline_env}
            self.sessions[target] = make_session(before_env, cwd=Path(plan.baseline))
            self.db_urls[target] = before_env["DATABASE_URL"]
            if plan.gc_log:
                before_env = dict(self.server_env, RELAY_BENCH_GC_LOG=str(log_dir / "gc-before.log"),
                                  DATABASE_URL=before_env["DATABASE_URL"], **plan.baseline_env)
                self.results["gc_log_before"] = str(log_dir / "gc-before.log")
            self.servers[target] = start_server(self.procs, "project.asgi:application", before_env,
                                                log_dir / "before.log", cwd=Path(plan.baseline),
                                                server=plan.baseline_server)
        else:
            extra_env = dict(self.own_database(ROOT), **self.relay_flush)
            self.sessions[target] = make_session(extra_env)
            self.db_urls[target] = extra_env["DATABASE_URL"]
            self.servers[target] = start_server(self.procs, "project.asgi:application", extra_env,
                                                log_dir / f"{target}.log", server=target)

    def step(self, target: str, streams: int, window: float, warmup: float, viewers: int = 1,
             profile: dict[str, str] | None = None, sample_lag: bool = False) -> dict[str, Any]:
        """One load step against one server, measured by a load coordinator in its own process."""
        plan = self.plan
        proc, port = self.servers[target]
        wait_idle(proc.pid)
        cfg = {"target": "naive" if target in ("naive", "bare") else "ours", "port": port,
               "session": self.sessions.get(target, self.session),
               "streams": streams, "viewers": viewers,
               "tokens_per_s": plan.tokens_per_s, "tokens": self.tokens, "seed": uuid.uuid4().int >> 80,
               "background": plan.background, "window": window, "warmup": warmup,
               "pids": {"server": proc.pid, "simulator": self.sim.pid}, "profile": profile,
               "loadgen": "tasks" if profile else plan.loadgen, "load_procs": plan.load_procs,
               "simulator": self.sim_url, "control": plan.control, "burst": plan.burst, "sample_lag": sample_lag}
        since = time.time()
        result = run_role(ROLES, "load", cfg, self.base_env, self.procs, timeout=window + warmup + 160)
        if proc.poll() is not None:
            raise RuntimeError(f"the {target} server died; see {self.log_dir}")
        if target in self.db_urls:
            result["to_created"] = to_created(self.db_urls[target], since)
        return result

    # --- the sections ----------------------------------------------------------------------------

    def latency(self) -> None:
        """Added latency at light load."""
        for target in ("ours", "naive"):
            r = self.step(target, self.plan.latency_streams, self.plan.latency_window, 2.0)
            self.results["latency"][target] = r
            print(report.latency_line(target, r), flush=True)

    def floor(self) -> None:
        """The floor reader, on asyncio's loop and on the loop ours runs on (project.serve: uvloop)."""
        plan, n = self.plan, self.plan.cpu_streams
        loops = ["asyncio"] + (["uvloop"] if plan.server == "project.serve" or "uvloop" in plan.server else [])
        for loop in loops:
            wait_idle(self.sim.pid, limit=0.1)
            cfg = {"simulator": self.sim_url, "streams": n, "tokens_per_s": plan.tokens_per_s,
                   "tokens": self.tokens, "seed": uuid.uuid4().int >> 80, "warmup": 3.0,
                   "window": plan.cpu_window, "loop": loop}
            f = run_role(ROLES, "floor", cfg, self.base_env, self.procs, timeout=plan.cpu_window + 160)
            self.results["cpu"]["floor"].append(f)
            print(f"floor {n} streams ({loop}): {f['us_per_event']:.1f} µs/event", flush=True)

    def cpu(self) -> None:
        """CPU per relayed delta: the floor, ours (1 and 3 viewers), the baseline, naive, the floor again."""
        plan, n = self.plan, self.plan.cpu_streams
        self.floor()
        targets = ["ours", *(["before"] if plan.baseline else []), *plan.asgi]
        # Rounds alternate the servers, so a busy spell on the shared machine hits them all alike,
        # and which goes first: the section favours the server it measures second (bench/README.md).
        order = [row for r in range(plan.cpu_rounds)
                 for row in [(t, v) for t in (targets if r % 2 == 0 else targets[::-1]) for v in VIEWERS]
                 + [("bare", 1)]] + [("naive", 1)]
        for k, (target, viewers) in enumerate(order):
            if target not in self.servers:
                self.start_extra(target)
            r = self.step(target, n, plan.cpu_window, 3.0, viewers)
            r.update(label=plan.server if target == "ours" else target, viewers=viewers, ours=target == "ours")
            self.results["cpu"]["rows"].append(r)
            print(report.cpu_line(target, viewers, r), flush=True)
            if target not in ("ours", "naive", "bare") and (k + 1 == len(order) or order[k + 1][0] != target):
                self.procs.stop(self.servers.pop(target)[0])
        self.floor()
        for fmt in (("flamegraph", "raw") if plan.profile else ()):
            # Not one of the measured rows: py-spy's sampling costs the server a little.
            out = RESULTS.parent / f"relay_profile.{'svg' if fmt == 'flamegraph' else 'txt'}"
            self.step("ours", n, plan.cpu_window, 3.0, 1, profile={"format": fmt, "path": str(out)})
            print(f"profile: {out.relative_to(ROOT)}", flush=True)

    def capacity(self) -> None:
        """Capacity, side by side: each step for ours, then for naive (and the others asked for)."""
        plan = self.plan
        failed = dict.fromkeys(plan.targets, 0)
        for streams in plan.steps:
            for target in plan.targets:
                self.results["capacity"].setdefault(target, [])
                if target not in self.servers:  # "before": the baseline checkout, beside ours step by step
                    self.start_extra(target)
                if failed[target] >= 2:  # two steps in a row past the limit: higher ones only get worse
                    self.results["capacity"][target].append({"streams": streams, "skipped": True})
                    continue
                r = self.step(target, streams, plan.window, plan.warmup, sample_lag=True)
                self.results["capacity"][target].append(r)
                ok = r["newest"]["p99"] <= LAG_LIMIT_MS and r["connected"] == streams and r["rate"] > 0.9
                failed[target] = 0 if ok else failed[target] + 1
                print(report.capacity_line(target, streams, r), flush=True)

    def writes(self) -> None:
        """Database writes per response, with runners built directly in Django processes: one
        process per pace, each counting its own statements, at once."""
        plan = self.plan
        probe_env = dict(self.env, DJANGO_SETTINGS_MODULE="project.settings")
        writes: list[dict[str, Any]] = [{} for _ in plan.writes_paces]

        def one(k: int, pace: int) -> None:
            cfg = {"simulator": self.sim_url, "tokens": plan.writes_tokens, "tokens_per_s": pace,
                   "background": plan.background}
            try:
                writes[k] = run_role(ROLES, "writes", cfg, probe_env, self.procs,
                                     timeout=plan.writes_tokens / pace * 3 + 120)
            except Exception as exc:  # reported, not fatal
                writes[k] = {"error": str(exc), **cfg}

        threads = [threading.Thread(target=one, args=(k, pace)) for k, pace in enumerate(plan.writes_paces)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.results["writes"] = writes
        for r in writes:
            print(report.writes_line(r), flush=True)


def run(plan: Plan, use_postgres: bool, log_dir: Path) -> dict[str, Any]:
    t_start = time.monotonic()
    with database(use_postgres) as (db_url, db_desc), contextlib.ExitStack() as databases:
        this = RelayRun(plan, use_postgres, log_dir, databases)
        this.results["database"] = db_desc
        try:
            this.start(db_url)
            if "latency" in plan.sections:
                this.latency()
            if "cpu" in plan.sections:
                this.cpu()
            if "capacity" in plan.sections:
                this.capacity()
            for proc, _ in this.servers.values():
                this.procs.stop(proc)
            if "writes" in plan.sections:
                this.writes()
        finally:
            this.procs.stop_all()
    this.results["seconds"] = time.monotonic() - t_start
    return this.results

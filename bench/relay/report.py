"""The relay benchmark's report: the tables of bench/results/relay.md and the console's progress lines.

Each section's table is left out when the section did not run; the CPU section's table is
bench/relay/cpu.py's. The notes under the tables in relay.md (level-2 headings) are kept when a
run rewrites the file.
"""

from __future__ import annotations

import os
from typing import Any

from bench.harness import fmt_ms
from bench.relay.cpu import per_delta
from bench.relay.cpu import render as render_cpu
from bench.relay.plan import LAG_LIMIT_MS, Plan
from bench.stamps import FLUSH_MIN_CHARS


def gc_passes(path: str | None) -> list[tuple[float, int, float]]:
    """(wall-clock start, generation, ms) of our server's slow collections (bench/gcprobe), if logged."""
    if not path or not os.path.exists(path):
        return []
    return [(float(f[0]), int(f[1]), float(f[2])) for f in (line.split() for line in open(path))]


def extra(r: dict[str, Any], gcs: list[tuple[float, int, float]]) -> str:
    """The capacity row's columns on what the lag waited for (rows of older runs have none)."""
    if "loadavg" not in r:
        return " |" * 6
    d = r["run_delay"]
    cells = [f"{r['loadavg']:.1f}", f"{d['server']:.0%} · {d['simulator']:.0%} · {d['load']:.0%}",
             fmt_ms(r["load_loop_lag_ms"]["p99"]), f"{r['load_us_per_frame']:.0f}"]
    c = r.get("control")
    cells.append(f"{fmt_ms(c['p99'])} · {fmt_ms(c['max'])}" if c and c.get("deltas") else "–")
    if gcs and "start_at" in r:
        full = [ms for t, g, ms in gcs if g == 2 and r["start_at"] <= t < r["start_at"] + r["window_s"]]
        cells.append(f"{len(full)} ({max(full):.0f})" if full else "0")
    else:
        cells.append("–")
    return "".join(f" | {c}" for c in cells)


def sustained(r: dict[str, Any]) -> bool:
    return r["newest"]["p99"] <= LAG_LIMIT_MS and r["connected"] == r["streams"] and r["rate"] > 0.9


def max_sustained(rows: list[dict[str, Any]]) -> int:
    """The highest step of an unbroken run of passed steps from the lowest."""
    best = 0
    for r in rows:
        if r.get("skipped") or not sustained(r):
            break
        best = r["streams"]
    return best


def steps_summary(target: str, rows: list[dict[str, Any]]) -> str:
    """Every step a relay passed and failed, each failure with the control streams' p99 (streams
    read straight from the simulator in the same window: late too, the machine was short of CPU)."""
    ran = [r for r in rows if not r.get("skipped")]
    passed = [str(r["streams"]) for r in ran if sustained(r)]
    failed = []
    for r in ran:
        if not sustained(r):
            c = r.get("control")
            control = f" (control p99 {fmt_ms(c['p99'])} ms)" if c and c.get("deltas") else ""
            failed.append(f"{r['streams']}{control}")
    return (f"{target} passed {', '.join(passed) or 'none'}" + (f", failed {', '.join(failed)}" if failed else ""))


def render(res: dict[str, Any], plan: Plan) -> str:
    out: list[str] = []
    sections: list[tuple[bool, int]] = []  # (has data, where it starts): sections not run are left out
    lat = res["latency"]
    sections.append((bool(lat), len(out)))
    out.append(f"### 1. Added latency, light load ({plan.latency_streams} streams x {plan.tokens_per_s} deltas/s, "
               f"{plan.latency_window:.0f} s window)\n")
    out.append("| relay | messages | deltas/message | newest p50 | newest p90 | newest p99 | newest max "
               "| oldest p50 | oldest p99 | oldest max |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for target in ("ours", "naive"):
        r = lat.get(target)
        if not r:
            continue
        out.append(f"| {target} | {r['messages']:,} | {r['deltas'] / max(r['messages'], 1):.2f} "
                   f"| {fmt_ms(r['newest']['p50'])} | {fmt_ms(r['newest']['p90'])} | {fmt_ms(r['newest']['p99'])} "
                   f"| {fmt_ms(r['newest']['max'])} | {fmt_ms(r['oldest']['p50'])} | {fmt_ms(r['oldest']['p99'])} "
                   f"| {fmt_ms(r['oldest']['max'])} |")
    out.append("\nms, receipt - emit. *newest*: the newest delta in each message (for ours, each patch); "
               "*oldest*: its oldest delta.\n")

    sections.append((bool(res["cpu"]["rows"]), len(out)))
    if res["cpu"]["rows"]:
        out.append(render_cpu(res["cpu"], plan.cpu_streams, plan.tokens_per_s, plan.cpu_window))
    sections.append((any(res["capacity"].values()), len(out)))
    out.append(f"### 2. Capacity at {plan.tokens_per_s} deltas/s per stream, one viewer each "
               f"({plan.warmup:.0f} s warm-up after ramp-up, {plan.window:.0f} s measured)\n")
    out.append("| streams | relay | flowing | ramp s | delivered | rate | lag p50 | lag p99 | lag max "
               "| server CPU (loop thread) | simulator CPU | load CPU | load avg | waiting for a CPU: server · sim "
               "· load | load loop lag p99 | load µs/frame | control p99 · max | full GCs (longest ms) | errors |")
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    gcs = {"ours": gc_passes(res.get("gc_log")), "before": gc_passes(res.get("gc_log_before"))}
    for i, streams in enumerate(plan.steps):
        for target in [t for t in ("ours", "before", "naive") if t in res["capacity"]]:
            rows = res["capacity"][target]
            if i >= len(rows):
                continue
            r = rows[i]
            if r.get("skipped"):
                out.append(f"| {streams} | {target} | skipped: failed the two steps before |" + " |" * 16)
                continue
            mark = "" if r["newest"]["p99"] <= LAG_LIMIT_MS else " ✗"
            out.append(f"| {streams} | {target} | {r['connected']} | {r['ramp_s']:.1f} | {r['delivered']:.1%} "
                       f"| {r['rate']:.1%} | {fmt_ms(r['newest']['p50'])} | {fmt_ms(r['newest']['p99'])}{mark} "
                       f"| {fmt_ms(r['newest']['max'])} | {r['cpu']['server']:.0%} ({r['cpu']['server_loop']:.0%}) "
                       f"| {r['cpu']['simulator']:.0%} "
                       f"| {r['cpu']['load']:.0%}{extra(r, gcs.get(target, []))} | {r['error_count']} |")
    ours_max = max_sustained(res["capacity"]["ours"])
    naive_max = max_sustained(res["capacity"]["naive"])
    out.append(f"\nHighest step with p99 lag <= {LAG_LIMIT_MS:.0f} ms (all viewers connected, > 90% of the nominal "
               f"delta rate received): **ours {ours_max}**, **naive {naive_max}**"
               + (f" ({ours_max / naive_max:.1f}x)" if naive_max else "") + ". Every step: "
               + "; ".join(steps_summary(t, res["capacity"][t]) for t in ("ours", "before", "naive")
                           if res["capacity"].get(t)) + ".\n")
    out.append("*delivered*: deltas received / (received + lost), lost counted by revision gaps (ours: a full "
               "outbox drops a patch, the viewer asks for a snapshot) or sequence gaps (naive: `group_send` "
               "drops on a full channel). *rate*: deltas received in the window / (connected streams x "
               f"{plan.tokens_per_s}/s x window). *lag*: receipt - emit of the newest delta of each message. CPU: "
               "share of one core over the window, from /proc/<pid>/stat (all threads; in brackets the main "
               "thread alone, the event loop: the rest is the database thread and other workers). *flowing*: "
               "viewers that received deltas (ramp-up ends when all do).\n")

    sections.append((bool(res["writes"]), len(out)))
    out.append(f"### 3. Database writes per response ({plan.writes_tokens:,}-delta answer)\n")
    out.append("| pace | duration | status | INSERT/UPDATE/DELETE/COPY | runner's own counter | checkpoints "
               "| event batches | vs one write per delta | breakdown |")
    out.append("|---:|---:|---|---:|---:|---:|---:|---:|---|")
    for r in res["writes"]:
        if "error" in r:
            out.append(f"| {r['tokens_per_s']}/s | failed: {r['error'][:80]} | | | | | | | |")
            continue
        ratio = plan.writes_tokens / r["writes"] if r["writes"] else float("inf")
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["by_kind"].items(), key=lambda kv: -kv[1]))
        out.append(f"| {r['tokens_per_s']} deltas/s | {r['seconds']:.1f} s | {r['status']} | {r['writes']} "
                   f"| {r['runner_counter']} "
                   f"| {r['checkpoints']} | {r['event_batches']} | {ratio:.1f}x fewer "
                   f"{'(>= 20x: met)' if ratio >= 20 else '(< 20x: MISSED)'} | {kinds} |")
    out.append("\nCounted by an `execute_wrapper` installed on every database connection of the process running "
               "the runner, and each `COPY` the checkpoint writer sends on PostgreSQL (psycopg runs it outside "
               "Django's wrappers) (submit's own writes, the conversation and the request rows, are not included: "
               f"{res['writes'][0].get('submit_writes', '?') if res['writes'] else '?'} statements).\n")
    bounds = [start for _, start in sections[1:]] + [len(out)]
    return "\n".join(line for (kept, start), end in zip(sections, bounds, strict=True) if kept
                     for line in out[start:end])


def flush_note(res: dict[str, Any]) -> str:
    flush = res.get("flush") or {}
    if flush.get("min_chars", FLUSH_MIN_CHARS) == FLUSH_MIN_CHARS:
        return f"RELAY_FLUSH_MIN_CHARS at its default, {FLUSH_MIN_CHARS}, though the stamps make each delta longer"
    return (f"RELAY_FLUSH_MIN_CHARS={flush['min_chars']}: {FLUSH_MIN_CHARS} scaled by what the stamps add to a "
            f"delta of {flush['plain_chars_per_delta']:.1f} characters, so that patches carry as many deltas as "
            "for the text unstamped (bench/stamps.py)")


HEADER = """# Relay benchmark

Generated by `python -m bench relay` (bench/relay/; `python -m bench all` runs the core benchmark
too). Reproduce with exactly that command from the repository root, PostgreSQL on 127.0.0.1:5432
(user postgres, trust auth). This run took {seconds:.0f} s.

Machine: {env}.

Setup, all on loopback, each in its own process: the simulator (`python -m responses_app.simulator`,
`sim-long`, `sim.stamp` puts each delta's emit wall-clock time into its text); our relay as ONE server
process (`python -m project.serve`: uvicorn with httptools, websockets-sansio and uvloop), development
settings, DEBUG off, in-memory channel layer, in-process runner,
default RELAY_* settings (flush interval 50 ms, checkpoints every 500 ms to 2 s (64 events), aiohttp upstream
transport) but {flush}) on {db}; the naive relay (bench/relay/naive.py: a Channels consumer per websocket,
`httpx.AsyncClient()` with its default transport, stdlib `json` per SSE line, one in-memory `group_send` per delta)
as ONE Daphne process; websocket viewers in two load processes per step (bench/relay/loadgen.py: websockets' sans-I/O
protocol on uvloop, one receive loop per process, one window start for both). Requests
go through the JSON API (`POST /api/requests`, session cookie + CSRF header, `background: {background}`),
then the viewer opens `/ws/requests/<id>/`; at the end of a step each viewer sends the explicit Stop
and waits for `terminal`, so no stream outlives its step. The machine's {cores} cores serve all processes:
simulator, server and load client share them, so the server never has a core to itself at high counts.

"""


def header(res: dict[str, Any], plan: Plan, env: str) -> str:
    """The top of relay.md: the command, the machine, the setup."""
    return HEADER.format(env=env, db=res["database"], seconds=res["seconds"], cores=os.cpu_count(),
                         background=str(plan.background).lower(), flush=flush_note(res))


# --- the console's progress lines ----------------------------------------------------------------


def latency_line(target: str, r: dict[str, Any]) -> str:
    return (f"latency {target}: newest p50 {fmt_ms(r['newest']['p50'])} p99 {fmt_ms(r['newest']['p99'])} ms; "
            f"oldest p50 {fmt_ms(r['oldest']['p50'])} p99 {fmt_ms(r['oldest']['p99'])} ms")


def cpu_line(target: str, viewers: int, r: dict[str, Any]) -> str:
    return (f"cpu {target} x{viewers}: {per_delta(r, viewers):.0f} µs/relayed delta, server "
            f"{r['cpu']['server']:.0%}, rate {r['rate']:.0%}, lag p99 {fmt_ms(r['newest']['p99'])} ms")


def capacity_line(target: str, streams: int, r: dict[str, Any]) -> str:
    return (f"{target:5} {streams:4} streams: delivered {r['delivered']:.1%} rate {r['rate']:.1%} "
            f"lag p50 {fmt_ms(r['newest']['p50'])} p99 {fmt_ms(r['newest']['p99'])} ms, server CPU "
            f"{r['cpu']['server']:.0%}, sim {r['cpu']['simulator']:.0%}, load {r['cpu']['load']:.0%}"
            f", ramp {r['ramp_s']:.1f}s{', errors ' + str(r['error_count']) if r['error_count'] else ''}"
            f"; load avg {r['loadavg']:.1f}, waiting for a CPU: server {r['run_delay']['server']:.0%} "
            f"sim {r['run_delay']['simulator']:.0%} load {r['run_delay']['load']:.0%}; load loop lag "
            f"p99 {fmt_ms(r['load_loop_lag_ms']['p99'])} ms, {r['load_us_per_frame']:.0f} µs/frame"
            + (f"; server loop lag gauge p50 {fmt_ms(r['server_loop_lag_ms']['p50'])} max "
               f"{fmt_ms(r['server_loop_lag_ms']['max'])} ms" if "server_loop_lag_ms" in r else "")
            + (f"; created to response.created p50 {r['to_created']['p50']:.2f} p99 "
               f"{r['to_created']['p99']:.2f} max {r['to_created']['max']:.2f} s"
               f" ({r['to_created']['never']} never)" if r.get("to_created") else "")
            + (f"; connect to first view p50 {r['first_view']['p50']:.2f} p99 "
               f"{r['first_view']['p99']:.2f} max {r['first_view']['max']:.2f} s"
               f" ({r['first_view']['none']} none)" if r.get("first_view") else "")
            + (f"; a burst of {r['burst']['sockets']} more connects at once: first view p50 "
               f"{r['burst']['p50']:.2f} p99 {r['burst']['p99']:.2f} max {r['burst']['max']:.2f} s"
               f" ({r['burst']['failed']} failed)" if r.get("burst") else ""))


def writes_line(r: dict[str, Any]) -> str:
    return (f"writes at {r.get('tokens_per_s')} deltas/s: {r.get('writes')} "
            f"(runner counter {r.get('runner_counter')}, {r.get('checkpoints')} checkpoints)")

"""The chaos run's report, in the manner of Jepsen's: for each invariant how many of the checked
were lost, then the pauses by fault, memory and connections over time, and the durability settings
the run had. Written to bench/results/chaos.md; bench/README.md gets its summary (between markers,
replaced on each run)."""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.chaos import schedule as s
from bench.chaos.faults import LEASE_S, Window
from bench.chaos.sampler import EVERY_S, Sample
from bench.chaos.traffic import ChaosViewer, Done, own_fault, pause_kinds
from bench.harness import pct

INVARIANTS = ("text", "viewers", "analytics", "tools", "terminal", "event log")
WHAT = {"text": "committed text == the upstream's, byte for byte",
        "viewers": "every viewer ends on it, text never went back (no delta lost or shown twice)",
        "analytics": "counted once (one row, the analytics' totals agree)",
        "tools": "each tool call run once (ToolCall rows and the tool's own log)",
        "terminal": "the expected terminal status within its bound",
        "event log": "the stored event log has no hole"}
TARGETS = {s.ROLLING_WORKER: 1.0, s.ROLLING_WEB: 1.0, s.KILL9: LEASE_S + 2.0}
START, END = "<!-- chaos:start -->", "<!-- chaos:end -->"


@dataclass
class Result:
    command: str
    minutes: float
    streams: int
    seed: int
    faults: list[s.Fault]
    windows: list[Window]
    done: list[Done]
    samples: list[Sample]
    flatness: dict[str, dict[str, Any]]
    durability: dict[str, str]
    counted: dict[str, Any]
    tools: dict[str, int]
    injector_errors: list[str]
    load: tuple[tuple[float, ...], tuple[float, ...]]  # loadavg at start and end
    wall_s: float
    t0: float  # wall clock of the load's start
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)  # Sampler.cpu_use()
    lags: list[float] = field(default_factory=list)  # Sampler.lags
    late: list[tuple[float, float]] = field(default_factory=list)  # Sampler.late
    lost: dict[str, tuple[int, int]] = field(default_factory=dict)
    pauses: dict[str, list[float]] = field(default_factory=dict)

    def tally(self) -> None:
        submitted = [d for d in self.done if d.request_id]
        for name in INVARIANTS:
            if name == "viewers":
                total = sum(len(d.viewers) for d in submitted)
                lost = sum(len(d.violations.get(name, [])) for d in self.done)
            else:
                pool = [d for d in self.done if name != "tools" or d.plan.kind == "tools"]
                if name == "event log":
                    pool = [d for d in submitted if d.plan.kind != "429"]
                total, lost = len(pool), sum(1 for d in pool if d.violations.get(name))
            self.lost[name] = (lost, total)
        if not self.counted.get("agree", False):
            lost, total = self.lost["analytics"]
            self.lost["analytics"] = (max(lost, 1), total)
        self.pauses = {}
        for d in submitted:
            for kind, pause in pause_kinds(d, self.windows).items():
                self.pauses.setdefault(kind, []).append(pause)

    def failed(self) -> bool:
        return any(lost for lost, _ in self.lost.values())

    def targets_met(self) -> dict[str, bool]:
        out = {f"p99 pause, {k} <= {v:g} s": pct(self.pauses.get(k, []), 99) <= v for k, v in TARGETS.items()
               if self.pauses.get(k)}
        out.update({f"RSS of {role} flat within 15%": f["flat"] for role, f in self.flatness.items()})
        return out


def _ms(x: float) -> str:
    return "-" if x != x else f"{x * 1000:,.0f} ms"


def invariants_table(r: Result) -> list[str]:
    lines = ["| Invariant | Lost / checked | Examples |", "|---|---:|---|"]
    for name in INVARIANTS:
        lost, total = r.lost[name]
        examples = [f"{d.request_id[:8]} ({d.plan.kind}): {d.violations[name][0]}" for d in r.done
                    if d.violations.get(name)][:2]
        lines.append(f"| {WHAT[name]} | **{lost}/{total}** | {'<br>'.join(examples).replace('|', '/') or ''} |")
    return lines


def pauses_table(r: Result) -> list[str]:
    lines = ["| While | Requests | p50 | p99 | max | Target |", "|---|---:|---:|---:|---:|---|"]
    for kind in s.KINDS:
        values = r.pauses.get(kind, [])
        if values:
            target = f"<= {TARGETS[kind]:g} s" if kind in TARGETS else ""
            lines.append(f"| {kind} | {len(values)} | {_ms(pct(values, 50))} | {_ms(pct(values, 99))} | "
                         f"{_ms(max(values))} | {target} |")
    return lines


def lag_line(r: Result) -> str:
    if not r.lags:
        return ""
    return (f"The load's own event loop, where pauses are timed, was late by {_ms(pct(r.lags, 50))} at p50, "
            f"{_ms(pct(r.lags, 99))} at p99 and {_ms(max(r.lags))} at most: a pause includes its lag."
            + (" Its longest: " + ", ".join(f"{_ms(lag)} at {at:.1f} s" for at, lag in
                                            sorted(r.late, key=lambda x: -x[1])[:8]) + "." if r.late else ""))


def violations_list(r: Result, limit: int = 30) -> list[str]:
    found = [(d, name, problem) for d in r.done for name, problems in d.violations.items() for problem in problems]
    lines = [f"- `{d.request_id[:8]}` {d.plan.kind} ({d.plan.model}, {len(d.viewers)} viewers, "
             f"{d.started - r.t0:.0f}-{d.ended - r.t0:.0f} s) **{name}**: {problem}"
             for d, name, problem in found[:limit]]
    if len(found) > limit:
        lines.append(f"- ... and {len(found) - limit} more")
    return lines or ["None."]


def longest_pauses(r: Result, each: int = 5) -> list[str]:
    """The longest pauses under each kind of fault (and with none), longest first: a kill -9's
    takeover is the slowest by design and would fill a single list."""
    by_kind: dict[str, list[tuple[float, float, Done, ChaosViewer]]] = {}
    for d in r.done:
        request_kind = own_fault(d)
        for v in d.viewers:
            for a, b in v.gaps:
                kinds = {w.kind for w in r.windows if w.overlaps(a, b)} or {request_kind}
                for kind in kinds:
                    by_kind.setdefault(kind, []).append((b - a, a, d, v))
    lines = []
    for kind in s.KINDS:
        gaps = sorted(by_kind.get(kind, []), key=lambda x: x[0], reverse=True)[:each]
        if gaps:
            lines.append(f"- {kind}:")
            lines.extend(f"  - {length:.2f} s from {at - r.t0:.1f} s (`{d.request_id[:8]}` {d.plan.kind}, "
                         f":{v.port}){trail(v, at, at + length)}" for length, at, d, v in gaps)
    return lines


def trail(viewer: ChaosViewer, a: float, b: float) -> str:
    """What the viewer's connections did within a pause, each step's time from its start."""
    steps = [f"+{t - a:.2f} {what}" for t, what in viewer.trail if a < t <= b]
    return ": " + ", ".join(steps) if steps else ""


def memory_table(r: Result) -> list[str]:
    lines = ["| Process | RSS first quarter | last quarter | max | growth | flat (<= 15%) |",
             "|---|---:|---:|---:|---:|---|"]
    for role, f in r.flatness.items():
        lines.append(f"| {role} | {f['first_mb']:.0f} MB | {f['last_mb']:.0f} MB | {f['max_mb']:.0f} MB | "
                     f"{f['growth']:+.1%} | {'yes' if f['flat'] else '**no**'} |")
    return lines


def cpu_table(r: Result) -> list[str]:
    """Where the cores went: the machine's cores shared by the layout, its services and the load."""
    if not r.cpu:
        return []
    lines = [f"| Process | cores used, mean | busiest {EVERY_S:g} s |", "|---|---:|---:|"]
    for role, c in sorted(r.cpu.items(), key=lambda item: -item[1].get("mean", 0.0)):
        lines.append(f"| {role} | {c.get('mean', 0.0):.2f} | {c['busiest']:.2f} |")
    total = sum(c.get("mean", 0.0) for c in r.cpu.values())
    lines.append(f"| all of them, of {os.cpu_count()} | {total:.2f} | |")
    return lines


def connections_table(r: Result) -> list[str]:
    names = sorted({n for x in r.samples for n in x.pg})
    roles = sorted({n for x in r.samples for n in x.sockets})
    lines = ["| Connections | min | median | max |", "|---|---:|---:|---:|"]
    for name in names:
        values = [float(x.pg.get(name, 0)) for x in r.samples if x.pg]
        lines.append(f"| PostgreSQL, {name} | {min(values):.0f} | {pct(values, 50):.0f} | {max(values):.0f} |")
    clients = [float(x.redis_clients) for x in r.samples if x.redis_clients >= 0]
    if clients:
        lines.append(f"| Redis clients | {min(clients):.0f} | {pct(clients, 50):.0f} | {max(clients):.0f} |")
    for role in roles:
        values = [float(x.sockets[role]) for x in r.samples if role in x.sockets]
        lines.append(f"| sockets of {role} | {min(values):.0f} | {pct(values, 50):.0f} | {max(values):.0f} |")
    return lines


def timeline(r: Result, rows: int = 24) -> list[str]:
    roles = sorted({n for x in r.samples for n in x.rss})
    step = max(1, len(r.samples) // rows)
    lines = ["| t | " + " | ".join(f"{role} MB" for role in roles) + " | PG conns | Redis clients |",
             "|---:|" + "---:|" * (len(roles) + 2)]
    for x in r.samples[::step]:
        rss = " | ".join(f"{x.rss[role]:.0f}" if role in x.rss else "-" for role in roles)
        lines.append(f"| {x.t:.0f} s | {rss} | {sum(x.pg.values())} | {x.redis_clients} |")
    return lines


def markdown(r: Result) -> str:
    submitted = [d for d in r.done if d.request_id]
    kinds = Counter(d.plan.kind for d in submitted)
    statuses = Counter(d.status for d in submitted)
    viewers = [v for d in submitted for v in d.viewers]
    verdict = "**FAILED: something was lost**" if r.failed() else "nothing lost"
    mix = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    out = [f"# Chaos run: {r.minutes:g} minutes, {r.streams} streams in flight, seed {r.seed}", "",
           f"`{r.command}`: {verdict}. {len(submitted)} requests ({mix}), "
           f"{len(viewers)} viewers; statuses {dict(sorted(statuses.items()))}. Wall time {r.wall_s:.0f} s on "
           f"{os.cpu_count()} cores; load average {r.load[0][0]:.1f} at the start, {r.load[1][0]:.1f} at the end "
           "(other work shared the machine). Layout: two web processes (`project.serve`), two `relayworker`s, "
           "the standalone simulator, private Redis and PostgreSQL (bench/cluster.py).", "",
           "## Invariants", "", *invariants_table(r), "",
           "## Longest pause of text a viewer saw, by the fault in progress", "",
           "Per request, the longest gap between two patches that appended text, seen by any of its viewers, "
           "attributed to the fault whose window it overlapped (a kill -9's window lasts until the lease ran out "
           "and a sweep ran); a request that met no fault counts under `none`, or under its own upstream "
           "fault (`sim.drop_after`). A tool round is not a pause: no text flows during it.", "",
           *pauses_table(r), "", lag_line(r), "",
           "Targets: " + ", ".join(f"{k}: {'met' if ok else '**missed**'}" for k, ok in r.targets_met().items()),
           "", "The longest pauses under each:", "", *longest_pauses(r), "",
           "## What was lost", "", *violations_list(r),
           "", "## Schedule and what happened", "",
           "```", *(str(f) for f in r.faults), "```", ""]
    for w in r.windows:
        out.append(f"- {w.start - r.t0:.1f}-{w.end - r.t0:.1f} s, {w.kind}{f' ({w.detail})' if w.detail else ''}: "
                   f"{'; '.join(w.steps)}")
    out += [f"- injector error: {e}" for e in r.injector_errors]
    reconnects = sum(v.reconnects for v in viewers)
    out += ["", f"Viewers reconnected {reconnects} times and asked for {sum(v.resyncs for v in viewers)} "
            f"snapshots.{moves(viewers)}", "", "## CPU", "", *cpu_table(r), "",
            "## Memory (after warm-up) and connections", "", *memory_table(r), "",
            *connections_table(r), "", "RSS over time (MB), PostgreSQL connections and Redis clients:", "",
            *timeline(r), "", "## Durability settings in force", "",
            *(f"- {k}: `{v}`" for k, v in r.durability.items()), "",
            f"Counted: the analytics say {r.counted.get('analytics_by_status')} (total "
            f"{r.counted.get('analytics_total')}), the run {r.counted.get('ours_by_status')}; tool calls "
            f"{r.tools}.", ""]
    return "\n".join(out)


def moves(viewers: list[ChaosViewer]) -> str:
    """How the viewers asked to move by a stopping web process fared (bench/chaos/moving.py)."""
    steps = [what for v in viewers for _, what in v.trail]
    if not (asked := steps.count("asked to move")):
        return ""
    failed = Counter(what.removeprefix("new socket failed: ").split(":")[0] for what in steps
                     if what.startswith("new socket failed"))
    closed = steps.count("old socket closed while moving")
    examples = [(t, v) for v in viewers for t, what in v.trail if what.startswith("new socket failed")][:3]
    return (f" Asked to move by a stopping web process {asked} times: moved "
            f"{sum(what.startswith('moved to') for what in steps)}, the old socket closed first {closed}, "
            f"the new one failed {sum(failed.values())} ({', '.join(f'{k} {n}' for k, n in failed.items()) or '-'})."
            + "".join(f"\n- a failed move on :{v.port}:{trail(v, t - 3, t + 2)}" for t, v in examples))


def summary(r: Result, report: str = "results/chaos.md") -> str:
    """The README's block; `report`: the full report's path from bench/."""
    rows = ["| Invariant | Lost / checked |", "|---|---:|"]
    rows += [f"| {WHAT[n]} | {r.lost[n][0]}/{r.lost[n][1]} |" for n in INVARIANTS]
    met = r.targets_met()
    return "\n".join([START, "", f"Latest: `{r.command}` ({len([d for d in r.done if d.request_id])} requests, "
                      f"load average {r.load[1][0]:.1f} on {os.cpu_count()} cores): "
                      f"{'**something lost**' if r.failed() else 'nothing lost'}; full report in "
                      f"[{report}]({report}).", "", *rows, "", *pauses_table(r), "", lag_line(r), "",
                      "Targets: " + ", ".join(f"{k}: {'met' if ok else '**missed**'}" for k, ok in met.items()) + ".",
                      "", END])


def write(r: Result, out: Path, readme: Path | None) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown(r))
    if readme is None:
        return
    text = readme.read_text()
    block = summary(r, out.resolve().relative_to(readme.resolve().parent).as_posix()
                    if out.resolve().is_relative_to(readme.resolve().parent) else str(out))
    if START in text and END in text:
        text = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    else:
        raise RuntimeError(f"{readme} has no {START} ... {END} section for the chaos run")
    readme.write_text(text)

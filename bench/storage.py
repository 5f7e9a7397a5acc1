"""The storage benchmark: what an answer costs in the database, and what a stream costs in memory.

    python -m bench storage            # ~6 minutes; prints the tables, writes bench/results/storage.md
    python -m bench storage --quick    # a smoke run (500 deltas, 10 streams); results file not written
    python -m bench storage --only memory --baseline /tmp/rss-base   # the memory probes, beside an older tree

One run, side by side, against the standalone simulator and a temporary database (the probes
themselves are bench/storage_probe.py, each in a Django process of its own):

* **checkpoints** of a 2,000-delta answer (sim-long) at 30 and at 200 deltas/s: the bytes of every
  checkpoint row as stored now (a base view, then ops; the Response once) beside what the format
  before stored for the same rows (the whole view and the Response in every row), over the
  answer's final text in bytes;
* **the raw event log** of the same answers: the compressed batches as stored beside their
  uncompressed SSE text (what the format before stored), over the final text;
* **memory per in-flight stream**: runners held just before the end of a 3,000-delta answer, the
  RSS each added stream costs once the process's thread pools run, the growth / N, the same from
  a cold start (the probe as first written), and the Python heap (tracemalloc) in another process;
  against 2 x text + 64 KiB. With `--baseline TREE` (a `git worktree` of an older commit) the
  memory probes run that tree's relay too, in the same run, side by side.

Bytes are the logical JSON and zstd bytes the relay hands to the database (PostgreSQL may TOAST-
compress a large row further). The notes under the tables in bench/results/storage.md are kept
when a run rewrites the file.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import (
    ROOT,
    Procs,
    base_env,
    database,
    django_env,
    keep_notes,
    migrate,
    reachable,
    run_role,
    start_simulator,
)
from bench.storage_probe import COLD_WARMUP_RUNNERS, KIB, WARMUP_RUNNERS

RESULTS = Path(__file__).resolve().parent / "results" / "storage.md"
PROBE = "bench.storage_probe"
WINDOW_S = 6.0  # RSS sampled every 0.5 s for this long (over malloc.TRIM_S) once the runners are held


def run(quick: bool, use_postgres: bool, only: str = "", baseline: str = "") -> dict[str, Any]:
    tokens = 500 if quick else 2000
    streams, mem_tokens = (10, 1000) if quick else (50, 3000)
    procs = Procs()
    results: dict[str, Any] = {"answers": [], "memory": []}
    shell_env = base_env()
    with database(use_postgres) as (db_url, db_desc), tempfile.TemporaryDirectory(prefix="relay-storage-") as shim:
        results["database"] = db_desc
        # Run from here, a probe imports this tree's bench and the baseline tree's relay (on PYTHONPATH).
        os.symlink(ROOT / "bench", Path(shim) / "bench")
        try:
            _sim, sim_url = start_simulator(procs, dict(shell_env, PYTHONUNBUFFERED="1"))
            env = django_env(shell_env, db_url, sim_url, DJANGO_SETTINGS_MODULE="project.settings")
            migrate(env)
            paces = (30, 200)
            answers: list[dict[str, Any]] = [{} for _ in paces]

            def one(k: int, pace: int) -> None:
                cfg = {"simulator": sim_url, "tokens": tokens, "tokens_per_s": pace}
                try:
                    answers[k] = run_role(PROBE, "answer", cfg, env, procs, timeout=tokens / pace * 3 + 120)
                except Exception as exc:  # reported, not fatal
                    answers[k] = {"error": str(exc), **cfg}

            threads = [threading.Thread(target=one, args=(k, p)) for k, p in enumerate(paces) if only != "memory"]
            for t in threads:
                t.start()
            for t in threads:  # the answers first: the memory probes load the machine
                t.join()
            results["answers"] = answers if threads else []
            for a in results["answers"]:
                print(answer_line(a) if "error" not in a else a, flush=True)
            trees: list[tuple[str, str | None]] = [("now", None)]
            if baseline:
                trees.insert(0, ("before", baseline))
            # the RSS with the pool started first, the RSS from a cold start (the pool started
            # inside the batch), the Python heap
            for tracing, warmup in ((False, WARMUP_RUNNERS), (False, COLD_WARMUP_RUNNERS), (True, WARMUP_RUNNERS)):
                for tree, root in trees:
                    cfg = {"simulator": sim_url, "streams": streams, "tokens": mem_tokens, "tokens_per_s": 100,
                           "tracemalloc": tracing, "window": 0 if tracing else WINDOW_S, "warmup": warmup,
                           "split": warmup == WARMUP_RUNNERS}
                    if root:
                        r = run_role(PROBE, "memory", cfg, dict(env, PYTHONPATH=root), procs, timeout=400,
                                     cwd=Path(shim))
                    else:
                        r = run_role(PROBE, "memory", cfg, env, procs, timeout=400)
                    r["tree"] = tree
                    results["memory"].append(r)
                    print(memory_line(r, tree, cfg), flush=True)
        finally:
            procs.stop_all()
    return results


def answer_line(a: dict[str, Any]) -> str:
    return (f"{a['tokens']} deltas at {a['tokens_per_s']}/s: checkpoints "
            f"{a['checkpoint_bytes'] / a['text_bytes']:.2f}x text (before "
            f"{a['checkpoint_bytes_before'] / a['text_bytes']:.1f}x), event log "
            f"{a['log_bytes'] / a['text_bytes']:.2f}x "
            f"(before {a['log_bytes_before'] / a['text_bytes']:.1f}x)")


def memory_line(r: dict[str, Any], tree: str, cfg: dict[str, Any]) -> str:
    return (f"memory {tree} {cfg['streams']} x {cfg['tokens']} deltas "
            f"({'tracemalloc' if cfg['tracemalloc'] else 'RSS'}, "
            f"warm-up {cfg['warmup']}, {r['threads_started']} threads started): "
            + (f"{r['per_added_stream'] / KIB:,.0f} KiB per added stream; " if cfg["split"] else "")
            + "growth / N "
            f"{r['per_stream'] / KIB:,.0f} KiB (max {r['per_stream_max'] / KIB:,.0f}), text "
            f"{r['text_bytes'] / KIB:,.1f} KiB; allocators "
            + ", ".join(f"{k} {v / KIB:,.0f} KiB" for k, v in r["allocators"].items())
            + "; samples " + " ".join(f"{v / KIB:.0f}" for v in r["samples"]))


def render(res: dict[str, Any], command: str) -> str:
    lines = ["# Storage and memory per answer", "",
             f"`{command}` on {platform.machine()} ({os.cpu_count()} cores, shared), Python "
             f"{platform.python_version()}, {res['database']}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
             "", "Bytes handed to the database over the answer's final text (UTF-8 bytes); *before* is what the "
             "format before this change stored for the same rows (computed from this run's rows: every row the "
             "whole view and the Response).", "",
             "| answer | text | checkpoints (rows, bases) | checkpoints now | before | ratio | event log now | before "
             "| ratio | zstd compress · decompress |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for a in res["answers"]:
        if "error" in a:
            lines.append(f"| {a['tokens']} deltas at {a['tokens_per_s']}/s | failed: {a['error'][:80]} |||||||||")
            continue
        t = a["text_bytes"]
        lines.append(
            f"| {a['tokens']} deltas at {a['tokens_per_s']}/s | {t / KIB:.1f} KiB | {a['checkpoints']}, {a['bases']} | "
            f"**{a['checkpoint_bytes'] / t:.2f}x** | {a['checkpoint_bytes_before'] / t:.1f}x | "
            f"{a['checkpoint_bytes_before'] / a['checkpoint_bytes']:.0f}x smaller | **{a['log_bytes'] / t:.2f}x** | "
            f"{a['log_bytes_before'] / t:.1f}x | {a['log_bytes_before'] / a['log_bytes']:.0f}x smaller | "
            f"{a['compress_us_per_kb']:.1f} · {a['decompress_us_per_kb']:.1f} us/KB |")
    lines += ["", "Targets: checkpoints <= 3x the text, event log <= 8x.", ""]
    return "\n".join(lines + render_memory(res, "")) + "\n"


def render_memory(res: dict[str, Any], command: str) -> list[str]:
    """The memory section; `command`: when it was run on its own (`--only memory`)."""
    lines: list[str] = []
    # keyed (tracemalloc?, tree); the probes whose pool started inside the batch apart
    mem = {(bool(m["tracemalloc"]), m.get("tree", "now")): m for m in res["memory"]
           if m.get("warmup", WARMUP_RUNNERS) == WARMUP_RUNNERS}
    cold = {m.get("tree", "now"): m for m in res["memory"]
            if not m["tracemalloc"] and m.get("warmup", WARMUP_RUNNERS) != WARMUP_RUNNERS}
    if mem:
        m = mem.get((False, "now")) or next(iter(mem.values()))
        text = m["text_bytes"]
        target = 2 * text + 64 * KIB
        trees = [t for t in ("before", "now") if (False, t) in mem or (True, t) in mem]
        lines += ["## Memory per in-flight stream", "",
                  f"{m['streams']} runners at once in one process, each held before the last deltas of a "
                  f"{m['tokens']}-delta answer ({text / KIB:.1f} KiB of text), after a warm-up of "
                  f"{WARMUP_RUNNERS} runners that starts the process's thread pools "
                  f"({m.get('threads_started', '?')} threads started after it). *Per added stream*: what the "
                  f"second {m['streams'] - m['streams'] // 2} runners added beside the first "
                  f"{m['streams'] // 2} (the RSS sampled every 0.5 s for {WINDOW_S:.0f} s once each half is held, "
                  "means); *growth / N*: from the base to all of them held. Target 2 x text + "
                  f"64 KiB = {target / KIB:.0f} KiB. *before*: the relay before this change (`--baseline`), "
                  "measured in the same run." + (f" `{command}`, {res['database']}; "
                                                   f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}."
                                                   if command else ""), "",
                  "| per stream | " + " | ".join(trees) + " | now, of target |", "|---" * (len(trees) + 2) + "|"]

        def row(label: str, probes: dict[str, dict[str, Any]], field: str) -> None:
            cells = [f"{probes[t][field] / KIB:.0f} KiB" if t in probes and probes[t].get(field) is not None
                     else "" for t in trees]
            now = probes.get("now", {}).get(field)
            lines.append(f"| {label} | " + " | ".join(cells) + (f" | {now / target:.0%} |" if now else " | |"))

        rss = {t: p for (tracing, t), p in mem.items() if not tracing}
        heap = {t: p for (tracing, t), p in mem.items() if tracing}
        row("**RSS per added stream**", rss, "per_added_stream")
        row("RSS growth / N (low: the warm-up's freed memory reused)", rss, "per_stream")
        if cold:
            started = cold.get("now", next(iter(cold.values()))).get("threads_started", "?")
            row(f"RSS growth / N, the cold probe (a warm-up of {COLD_WARMUP_RUNNERS}, one batch: "
                f"{started} threads started inside it)", cold, "per_stream")
            row("the same, largest sample (the first, before the keeper's first trim)", cold, "per_stream_max")
            row("the same, right after `malloc_trim(0)`", cold, "trimmed")
        row("Python heap per added stream (tracemalloc, another process)", heap, "per_added_stream")
        row("Python heap growth / N", heap, "per_stream")
        for t in trees:
            alloc = mem.get((False, t), {}).get("allocators") or {}
            if alloc:
                lines += ["", f"Where the RSS is, per added stream, {t} (`mallinfo2`, pymalloc's statistics, "
                          f"before the probe's own trim): pymalloc's arenas "
                          f"{alloc.get('pymalloc_arenas', 0) / KIB:.0f} KiB, of which blocks in use "
                          f"{alloc.get('pymalloc_used', 0) / KIB:.0f} KiB; glibc malloc in use "
                          f"{alloc.get('malloc_in_use', 0) / KIB:.0f} KiB (objects over 512 bytes, C libraries), "
                          f"free but kept {alloc.get('malloc_free_kept', 0) / KIB:.0f} KiB."]
        now_rss = mem.get((False, "now"), {})
        if now_rss.get("trim_ms") is not None:
            lines += ["", f"One `malloc_trim(0)` at {m['streams']} held streams took {now_rss['trim_ms']:.2f} ms "
                      f"(the keeper's own calls: {1000 * (now_rss.get('keeper_trim_s') or 0):.2f} ms in all)."]
        for t in trees:
            if (True, t) in mem:
                lines += ["", f"Largest heap holders per stream, {t} (tracemalloc, by line):", ""]
                lines += [f"- `{where}`: {size / KIB:.1f} KiB" for where, size in mem[(True, t)]["top"]]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench storage")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sqlite", action="store_true", help="a temporary SQLite file instead of PostgreSQL")
    parser.add_argument("--only", choices=["memory"], default="", help="only the memory probes")
    parser.add_argument("--baseline", default="", help="another tree (e.g. a `git worktree` of an older "
                        "commit) whose relay the memory probes measure beside this one's")
    args = parser.parse_args(argv)
    use_postgres = not args.sqlite and reachable(5432)
    res = run(args.quick, use_postgres, args.only, args.baseline)
    command = ("python -m bench storage" + (" --quick" if args.quick else "") + (" --sqlite" if args.sqlite else "")
               + (f" --only {args.only}" if args.only else "")
               + (f" --baseline {args.baseline}" if args.baseline else ""))
    report = render(res, command)
    print(report)
    if not args.quick and not args.only:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(keep_notes(RESULTS, report))
    elif not args.quick and RESULTS.exists():  # the memory section alone, the answers' kept
        kept = RESULTS.read_text().split("## Memory per in-flight stream")[0]
        RESULTS.write_text(keep_notes(RESULTS, kept + "\n".join(render_memory(res, command)) + "\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

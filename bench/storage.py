"""The storage benchmark: what an answer costs in the database, and what a stream costs in memory.

    python -m bench storage            # ~6 minutes; prints the tables, writes bench/results/storage.md
    python -m bench storage --quick    # a smoke run (500 deltas, 10 streams); results file not written
    python -m bench storage --only memory --baseline /tmp/rss-base   # the memory probes, beside an older tree

One run, side by side:

* **checkpoints** of a 2,000-delta answer (sim-long) at 30 and at 200 deltas/s, each streamed by a
  StreamRunner in a Django process of its own against the standalone simulator and a temporary
  database: the bytes of every checkpoint row as stored now (a base view, then ops; the Response
  once) beside what the format before stored for the same rows (the whole view and the Response
  in every row: each row's view is materialised from this run's rows; its Response is the final
  one with the text cut to that revision's, which is what the old snapshot held), over the
  answer's final text in bytes;
* **the raw event log** of the same answers: the compressed batches as stored beside their
  uncompressed SSE text (what the format before stored), over the final text;
* **memory per in-flight stream**: after a warm-up that starts the process's thread pools, N/2
  runners, then N/2 more beside them, in one process, each held just before the end of a
  3,000-delta answer (the simulator stalls it): the RSS the second half added, per runner (each
  half sampled every 0.5 s over WINDOW_S, the lease keeper trimming the allocator every
  malloc.TRIM_S), and the growth / N from the base; in a second process, the Python heap
  (tracemalloc) the same two ways with its largest holders; against 2 x text + 64 KiB. Also the
  probe as it was before 2026-12-04 (a warm-up of 2: growth / N counted the pool starting);
  where the RSS is (glibc's `mallinfo2`, pymalloc's statistics), the RSS right after
  `malloc_trim(0)` and that call's cost. With `--baseline TREE` (a `git worktree` of an older
  commit) the same probes run that tree's relay too, in the same run, side by side.
  `cfg["detail"]` (for a hand-run probe) adds the growth per object type (`gc.get_objects()`),
  per mapping kind (`/proc/self/smaps`), per glibc arena (`malloc_info`) and, with
  `cfg["frames"]`, tracemalloc's largest holders grouped by traceback.

Bytes are the logical JSON and zstd bytes the relay hands to the database (PostgreSQL may TOAST-
compress a large row further; the old format's rows were compressible, ours mostly are not).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.relay import PY, ROOT, Procs, _django, _make_requests, database, reachable, rss_bytes, start_simulator

RESULTS = Path(__file__).resolve().parent / "results" / "storage.md"
KIB = 1024


# The memory probe's warm-up: runners run (then stopped) before the base is taken. Enough that
# every thread the process keeps (RELAY_DB_THREADS database threads, the checkpoint writer) is
# started before the base: with a warm-up of 2 (the probe until 2026-12-04), 5 database threads
# started inside the batch of 50, a fixed cost of the process (each thread's stack, its state and,
# with glibc's defaults, its own malloc arena) that growth / N counted as the streams'. The
# result counts the threads started inside the batch (`threads_started`). The per-stream figure
# is the slope (`per_added_stream`): the RSS the second half of the runners added beside the
# first, which neither the pool starting nor the warm-up's freed memory reused can bend. The
# probe with a warm-up of 2 still runs, its growth / N reported beside as before.
WARMUP_RUNNERS = 10
COLD_WARMUP_RUNNERS = 2


# --- role: one answer, then what it stored ---------------------------------------------------------


async def _answer(cfg: dict[str, Any]) -> dict[str, Any]:
    import orjson
    from asgiref.sync import sync_to_async

    from responses_app import selectors, storage
    from responses_app.models import Checkpoint, EventRecord, ResponseRequest
    from responses_app.relay.hub import get_hub
    from responses_app.relay.runner import StreamRunner

    metadata = {"sim.tokens": str(cfg["tokens"]), "sim.tokens_per_s": str(cfg["tokens_per_s"])}
    [request_id] = await sync_to_async(_make_requests)(1, metadata, False)
    hub = get_hub()
    runner = StreamRunner(request_id, hub)
    started = time.monotonic()
    hub.spawn(request_id, lambda: runner)
    await asyncio.wait_for(runner.finished.wait(), timeout=cfg["tokens"] / cfg["tokens_per_s"] * 3 + 60)
    elapsed = time.monotonic() - started

    def measure() -> dict[str, Any]:
        request = ResponseRequest.objects.get(pk=request_id)
        text = request.final_text.encode()
        rows = list(Checkpoint.objects.filter(request_id=request_id).order_by("revision"))
        final_snapshot = next(r.snapshot for r in reversed(rows) if r.snapshot is not None)
        snapshot_bytes = len(orjson.dumps(final_snapshot))
        now = before = 0
        bases = 0
        chain: list[tuple[int, int | None, Any, Any]] = []
        for row in rows:
            now += sum(len(orjson.dumps(v)) for v in (row.view, row.ops, row.snapshot) if v is not None)
            bases += row.is_base
            chain.append((row.revision, row.base_revision, row.view, row.ops))
            view = selectors._view_from(chain)
            assert view is not None and view["revision"] == row.revision, "a stored revision did not materialise"
            shown = sum(len(b.get("text", "").encode()) for b in view["blocks"] if b.get("kind") == "text")
            before += len(orjson.dumps(view)) + snapshot_bytes - len(text) + shown
        assert selectors.view_latest(request=request) == runner.view.to_dict()
        records = list(EventRecord.objects.filter(request_id=request_id).values_list("data", "compressed"))
        log_now = sum(len(c) if c is not None else len(d.encode()) for d, c in records)
        log_before = sum(len(storage.log_bytes(d, c)) for d, c in records)
        assert selectors.event_log_text(request_id=request_id).encode() == b"".join(
            storage.log_bytes(d, c) for d, c in records)
        t0 = time.perf_counter()
        raw = [storage.log_bytes(d, c) for d, c in records]
        decompress_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for data in raw:
            storage.log_compress(data)
        compress_s = time.perf_counter() - t0
        return {"status": request.status, "text_bytes": len(text), "checkpoints": len(rows), "bases": bases,
                "reasons": [r.reason for r in rows], "checkpoint_bytes": now, "checkpoint_bytes_before": before,
                "batches": len(records), "events": request.events, "log_bytes": log_now,
                "log_bytes_before": log_before, "compress_us_per_kb": compress_s / (log_before / KIB) * 1e6,
                "decompress_us_per_kb": decompress_s / (log_before / KIB) * 1e6}

    return {"tokens": cfg["tokens"], "tokens_per_s": cfg["tokens_per_s"], "seconds": elapsed,
            **await sync_to_async(measure)()}


# --- role: many runners in flight --------------------------------------------------------------------


def _allocators() -> dict[str, int]:
    """Bytes held by glibc malloc (in use, and free but kept) and by pymalloc's arenas (in use)."""
    import ctypes
    import re
    import tempfile

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost")]

    out: dict[str, int] = {}
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
        info = libc.mallinfo2()
        out.update(malloc_in_use=info.uordblks + info.hblkhd, malloc_free_kept=info.fordblks)
    except (OSError, AttributeError):  # not glibc
        pass
    with tempfile.TemporaryFile(mode="w+") as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        stats = tmp.read()
    arenas = re.search(r"\d+ arenas \* \d+ bytes/arena\s*=\s*([\d,]+)", stats)
    used = re.search(r"# bytes in allocated blocks\s*=\s*([\d,]+)", stats)
    if arenas and used:
        out.update(pymalloc_arenas=int(arenas.group(1).replace(",", "")),
                   pymalloc_used=int(used.group(1).replace(",", "")))
    return out


def _where(filename: str) -> str:
    return str(filename).replace(str(ROOT) + "/", "").split("site-packages/")[-1]


def _type_counts() -> dict[str, int]:
    counts: dict[str, int] = {}
    for obj in gc.get_objects():
        name = type(obj).__qualname__
        counts[name] = counts.get(name, 0) + 1
    return counts


def _arenas() -> list[dict[str, int]]:
    """glibc's `malloc_info`: per arena (the first is the main thread's), bytes in use and free."""
    import ctypes
    import re
    import tempfile

    libc = ctypes.CDLL("libc.so.6")
    libc.fdopen.restype = ctypes.c_void_p
    with tempfile.TemporaryFile(mode="w+") as tmp:
        fp = libc.fdopen(os.dup(tmp.fileno()), b"w")
        libc.malloc_info(0, ctypes.c_void_p(fp))
        libc.fclose(ctypes.c_void_p(fp))
        tmp.seek(0)
        xml = tmp.read()
    out = []
    for heap in re.findall(r'<heap nr="\d+">(.*?)</heap>', xml, re.S):
        total = re.search(r'<system type="current" size="(\d+)"/>', heap)
        free = re.findall(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"/>', heap)
        mmap = re.search(r'<total type="mmap" count="\d+" size="(\d+)"/>', heap)
        out.append({"system": int(total.group(1)) if total else 0, "free": sum(int(f) for f in free),
                    "mmap": int(mmap.group(1)) if mmap else 0})
    return out


def _smaps() -> dict[str, int]:
    """RSS by mapping kind: [heap] (brk), anonymous (mmap: pymalloc's arenas, glibc's thread arenas,
    large blocks), files."""
    out: dict[str, int] = {}
    kind = ""
    with open("/proc/self/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5:
                path = parts[5] if len(parts) > 5 else ""
                kind = "heap" if path == "[heap]" else "anon" if not path else "stack" if path == "[stack]" else "file"
            elif parts[0] == "Rss:":
                out[kind] = out.get(kind, 0) + int(parts[1]) * KIB
    return out


async def _memory(cfg: dict[str, Any]) -> dict[str, Any]:
    import tracemalloc

    from asgiref.sync import sync_to_async

    from responses_app.relay.hub import get_hub
    from responses_app.relay.runner import StreamRunner

    hub = get_hub()
    tokens, n, pace = cfg["tokens"], cfg["streams"], cfg["tokens_per_s"]
    # created, in_progress, item.added, part.added, then one delta per token: held before the last
    # few deltas, so each runner stays in flight with almost all of its text.
    stall_at = 4 + tokens - 5
    metadata = {"sim.tokens": str(tokens), "sim.tokens_per_s": str(pace), "sim.stall_at": str(stall_at),
                "sim.stall_ms": "180000"}  # the first half waits while the second streams

    async def batch(count: int) -> list[StreamRunner]:
        ids = await sync_to_async(_make_requests)(count, metadata, False)
        runners = [StreamRunner(rid, hub) for rid in ids]
        for rid, runner in zip(ids, runners, strict=True):
            hub.spawn(rid, lambda r=runner: r)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            if all((r.transcript.last_sequence_number or 0) >= stall_at - 1 for r in runners):
                break
        else:
            raise RuntimeError("runners did not reach the stall")
        # trailing flush timers and the quiet stream's checkpoint commit
        while any(len(r.delivery.log) or r.delivery.checkpoints.unwritten for r in runners):
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        return runners

    async def stop(runners: list[StreamRunner]) -> None:
        for r in runners:
            r.cancel()
        await asyncio.gather(*(r.finished.wait() for r in runners))

    tracing = cfg["tracemalloc"]
    # Warm-up: import and cache everything a runner touches, and start the process's thread pools
    # (the runner's database threads, the checkpoint writer's): see WARMUP_RUNNERS.
    await stop(await batch(cfg.get("warmup", WARMUP_RUNNERS)))
    gc.collect()
    if tracing:
        tracemalloc.start(cfg.get("frames", 1))
    gc.collect()
    base_traced = tracemalloc.get_traced_memory()[0] if tracing else 0
    base_rss, base_alloc, base_threads = rss_bytes(), _allocators(), threading.active_count()
    detail = cfg.get("detail", False)
    base_types = _type_counts() if detail else {}
    base_maps = _smaps() if detail else {}
    base_arenas = _arenas() if detail else []

    async def sample() -> list[int]:
        """The RSS growth, sampled over a while, not once: the keeper trims every malloc.TRIM_S,
        wherever a sample falls."""
        gc.collect()
        out = []
        for _ in range(int(cfg.get("window", 0) / 0.5)):
            out.append(rss_bytes() - base_rss)
            await asyncio.sleep(0.5)
        return out + [rss_bytes() - base_rss]

    # Half the runners, then the other half beside them: what the second half added is what a
    # stream costs once the process runs streams (no pool starting, no warm-up's freed memory
    # reused). `split` False: all N in one batch, the probe before 2026-12-04.
    half = n // 2 if cfg.get("split", True) else 0
    runners = await batch(half) if half else []
    half_samples = await sample() if half else [0]
    half_traced = (tracemalloc.get_traced_memory()[0] - base_traced) if tracing else 0
    half_alloc = _allocators() if half else base_alloc
    runners += await batch(n - half)
    samples = await sample()
    attribution: dict[str, Any] = {}
    if detail:
        types = _type_counts()
        attribution["types"] = sorted(((k, (types[k] - base_types.get(k, 0)) / n) for k in types
                                       if types[k] - base_types.get(k, 0) >= n // 2), key=lambda kv: -kv[1])[:40]
        maps = _smaps()
        attribution["maps"] = {k: (maps.get(k, 0) - base_maps.get(k, 0)) / n for k in set(maps) | set(base_maps)}
        arenas = _arenas()
        attribution["arenas"] = [{k: (a[k] - (base_arenas[i][k] if i < len(base_arenas) else 0)) / n for k in a}
                                 for i, a in enumerate(arenas)]
    traced = (tracemalloc.get_traced_memory()[0] - base_traced) if tracing else 0
    keeper = hub.leases
    allocators = {k: (v - half_alloc.get(k, 0)) / (n - half) for k, v in _allocators().items()}  # per added stream
    trimmed = trim_ms = None
    if not tracing:  # what glibc keeps free and could give back
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            started = time.perf_counter()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            trim_ms = (time.perf_counter() - started) * 1000
            trimmed = (rss_bytes() - base_rss) / n
    text_bytes = sum(len(r.final_text().encode()) for r in runners) / n
    top: list[tuple[str, int]] = []
    if tracing:
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        for stat in snapshot.statistics("lineno")[:10]:
            frame = stat.traceback[0]
            top.append((f"{_where(frame.filename)}:{frame.lineno}", stat.size // n))
        if detail:
            attribution["tracebacks"] = [
                (stat.size / n, [f"{_where(f.filename)}:{f.lineno}" for f in stat.traceback])
                for stat in snapshot.statistics("traceback")[:40]]
        tracemalloc.stop()
    await stop(runners)
    mean, half_mean = sum(samples) / len(samples), sum(half_samples) / len(half_samples)
    return {"streams": n, "tokens": tokens, "tokens_per_s": pace, "tracemalloc": tracing,
            "per_stream": (traced if tracing else mean) / n,
            "per_added_stream": ((traced - half_traced) if tracing else (mean - half_mean)) / (n - half),
            "per_stream_max": max(samples) / n, "samples": [s / n for s in samples], "trim_ms": trim_ms,
            "warmup": cfg.get("warmup", WARMUP_RUNNERS), "threads_started": threading.active_count() - base_threads,
            "keeper_trim_s": getattr(keeper, "trim_seconds", None), "text_bytes": text_bytes, "top": top,
            "allocators": allocators, "trimmed": trimmed, **attribution}


def role_main(role: str, cfg: dict[str, Any]) -> None:
    if os.environ.get("BENCH_RECV_MAX"):  # an experiment: asyncio's bytes per recv (256 KiB by default)
        from asyncio import selector_events

        selector_events._SelectorSocketTransport.max_size = int(os.environ["BENCH_RECV_MAX"])
    _django(cfg)
    result = asyncio.run(_answer(cfg) if role == "answer" else _memory(cfg))
    print(json.dumps(result))


def run_role(role: str, cfg: dict[str, Any], env: dict[str, str], procs: Procs, timeout: float,
             script: bool = False) -> dict[str, Any]:
    """`script`: this file run as a script, so that the PYTHONPATH in `env` (another tree: the
    baseline) provides the relay, and this file only the probe."""
    import subprocess

    probe = [__file__] if script else ["-m", "bench.storage"]
    proc = procs.start([PY, *probe, "--role", role, "--config", json.dumps(cfg)], env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{role} did not finish in {timeout:.0f}s") from None
    finally:
        procs.stop(proc)
    if proc.returncode != 0:
        raise RuntimeError(f"{role} failed ({proc.returncode}):\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


# --- orchestration and report ----------------------------------------------------------------------


WINDOW_S = 6.0  # RSS sampled every 0.5 s for this long (over malloc.TRIM_S) once the runners are held


def run(quick: bool, use_postgres: bool, only: str = "", baseline: str = "") -> dict[str, Any]:
    import subprocess

    tokens = 500 if quick else 2000
    streams, mem_tokens = (10, 1000) if quick else (50, 3000)
    procs = Procs()
    results: dict[str, Any] = {"answers": [], "memory": []}
    base_env = {k: v for k, v in os.environ.items()
                if k not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE", "OPENAI_API_KEY",
                             "OPENAI_BASE_URL", "DEBUG")}
    with database(use_postgres) as (db_url, db_desc):
        results["database"] = db_desc
        try:
            _sim, sim_url = start_simulator(procs, dict(base_env, PYTHONUNBUFFERED="1"))
            env = dict(base_env, DJANGO_ENV="development", DEBUG="false", DATABASE_URL=db_url, LOG_LEVEL="WARNING",
                       DJANGO_SETTINGS_MODULE="project.settings", SIMULATOR_BASE_URL=sim_url, OPENAI_BASE_URL="",
                       OPENAI_API_KEY="", RELAY_MAX_CONCURRENT_PER_USER="1000000",
                       RELAY_SUBMIT_RATE="1000000/s", RELAY_MAX_SOCKETS_PER_USER="1000000")
            subprocess.run([PY, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True,
                           capture_output=True)
            paces = (30, 200)
            answers: list[dict[str, Any]] = [{} for _ in paces]

            def one(k: int, pace: int) -> None:
                cfg = {"simulator": sim_url, "tokens": tokens, "tokens_per_s": pace}
                try:
                    answers[k] = run_role("answer", cfg, env, procs, timeout=tokens / pace * 3 + 120)
                except Exception as exc:  # reported, not fatal
                    answers[k] = {"error": str(exc), **cfg}

            threads = [threading.Thread(target=one, args=(k, p)) for k, p in enumerate(paces) if only != "memory"]
            for t in threads:
                t.start()
            for t in threads:  # the answers first: the memory probes load the machine
                t.join()
            results["answers"] = answers if threads else []
            for a in results["answers"]:
                if "error" not in a:
                    print(f"{a['tokens']} deltas at {a['tokens_per_s']}/s: checkpoints "
                          f"{a['checkpoint_bytes'] / a['text_bytes']:.2f}x text (before "
                          f"{a['checkpoint_bytes_before'] / a['text_bytes']:.1f}x), event log "
                          f"{a['log_bytes'] / a['text_bytes']:.2f}x "
                          f"(before {a['log_bytes_before'] / a['text_bytes']:.1f}x)",
                          flush=True)
                else:
                    print(a, flush=True)
            trees: list[tuple[str, str | None]] = [("now", None)]
            if baseline:
                trees.insert(0, ("before", baseline))
            # the RSS with the pool started first, the RSS as measured before (the pool started
            # inside the batch), the Python heap
            for tracing, warmup in ((False, WARMUP_RUNNERS), (False, COLD_WARMUP_RUNNERS), (True, WARMUP_RUNNERS)):
                for tree, root in trees:
                    cfg = {"simulator": sim_url, "streams": streams, "tokens": mem_tokens, "tokens_per_s": 100,
                           "tracemalloc": tracing, "window": 0 if tracing else WINDOW_S, "warmup": warmup,
                           "split": warmup == WARMUP_RUNNERS}
                    r = run_role("memory", cfg, dict(env, PYTHONPATH=root) if root else env, procs, timeout=400,
                                 script=bool(root))
                    r["tree"] = tree
                    results["memory"].append(r)
                    print(f"memory {tree} {streams} x {mem_tokens} deltas ({'tracemalloc' if tracing else 'RSS'}, "
                          f"warm-up {warmup}, {r['threads_started']} threads started): "
                          + (f"{r['per_added_stream'] / KIB:,.0f} KiB per added stream; " if cfg["split"] else "")
                          + "growth / N "
                          f"{r['per_stream'] / KIB:,.0f} KiB (max {r['per_stream_max'] / KIB:,.0f}), text "
                          f"{r['text_bytes'] / KIB:,.1f} KiB; allocators "
                          + ", ".join(f"{k} {v / KIB:,.0f} KiB" for k, v in r["allocators"].items())
                          + "; samples " + " ".join(f"{v / KIB:.0f}" for v in r["samples"]),
                          flush=True)
        finally:
            procs.stop_all()
    return results


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


# What the probes' attribution found (cfg["detail"], by hand at 50 streams, 2026-12-01), and what the
# relay does about it: the explanation under the table, kept with the code that measures it.
REMAINS = """\
How it is measured, since 2026-12-04. Until then the probe took its base after a warm-up of 2
runners and divided the growth to all 50 held by 50: 88-107 KiB depending on the run and the
machine, against a Python heap of 51-55. heaptrack on the probe (its process exiting with
everything live at the sample, at 10 and at 50 streams; `heaptrack_print` leaks, diffed) put what
malloc holds for each added stream at 19 KiB, Python's objects over 512 bytes 18 of it: libpq's,
zstd's and OpenSSL's allocations did not grow with the streams. What growth / N had counted
beyond the heap was the process starting 5-6 of its database threads inside the batch (each its
stack, its thread state and, with glibc's defaults, a malloc arena of its own): a cost of the
process, bounded by RELAY_DB_THREADS + 1, spread over the streams, and different in every run.
The probe now runs a warm-up of 10 (the pools started: 0 threads start after it) and reports the
slope: what 25 runners held beside 25 others added. Side by side, the same relay twice in one
run: 61 and 59 KiB per added stream, where the probe before read 95 and 96; two more runs 55 and
56; at 100 streams (50 beside 50, by hand) 62, so it is linear in the streams. Growth / N from the
warmed base reads lower still (33-45) because the batch reuses memory the warm-up freed; it is
shown, not used.

What an added stream holds (50 streams; tracemalloc, `cfg["detail"]` probes, `mallinfo2`):

- **The text, once**: 15 KiB (`textbuf`: the view's joined text).
- **The rest of the Python heap**, about 34 KiB: the stream's HTTP exchange, about 6 KiB (httpx's
  `Request` and `Headers` about 2.5, aiohttp's protocol, parser and `StreamReader` about 4: its
  two deques keep up to 16 freed blocks each after a burst, 2 KiB each here); the transcript's
  assembler state beyond the text (about 4); the runner and its collaborators (the request's
  JSON `input` and `params` 0.9, the task's coroutines); the Response's fields for the snapshot
  (a compact JSON str, about 1 KiB); Django's and psycopg's per-process caches of query texts.
- **pymalloc's pools beyond its blocks in use**: pools that a few live objects pin among the
  churn's freed ones; and glibc's free memory kept between the lease keeper's `malloc_trim(0)`
  rounds (`responses_app/relay/malloc.py`, every 2 s; 0.1 ms a call at 50 streams). Together the
  6-12 KiB between the heap (48-49 per added stream) and the RSS (55-62).

Cut in earlier rounds (tracemalloc by traceback; RSS side by side, the probe before): the runner's
two `asyncio.Event`s, each with a `deque` of waiters from the start (1.5 KiB; `relay/flag.py`'s
slotted `Flag`); the `response.created` Response's parsed dict tree kept for the snapshot (2.2 KiB;
now `orjson.dumps(...).decode()`, a str of the exact size); the lease round's query texts, one
parameter per runner, so psycopg cached a text per runner count (now two `uuid[]` arrays on
PostgreSQL, one text whatever the count: `services.leases_renew`); the last chunk read, which the
four generators under httpx's `aiter_bytes` each kept while the stream waited (up to 16 KiB;
`upstream.body_chunks` reads aiohttp's buffer directly); the `ResponseRequest` model instance
(now `selectors.RunRequest`, 7 columns); the runner's `__dict__` (now `__slots__`); a frozenset
of the redacted fields per stream (now one per process); a bound method per event type per
assembler (7 KiB; one table for all); a Django `DatabaseWrapper` per runner task, built by asking
`connection.vendor` on the event loop (3 KiB); the POST body as orjson's bytes, which keep a 4 KiB
buffer however short the JSON (now a str). The probe before read 160 KiB when these began.

Tried and not shipped: `mallopt(M_ARENA_MAX, 1)` at start-up (2026-12-04: the probe before read
93 -> 87 and 95 -> 90 KiB with it, but with the pools started first 52 against 51 (growth / N
after a warm-up of 10): it saves only the threads' own arenas, a fixed cost of the process);
`MALLOC_ARENA_MAX=2` with fixed mmap/trim thresholds, asyncio reading 16 KiB per `recv` instead
of 256, `PYTHONMALLOC=malloc` (none helped).

The target is met: 55-62 KiB per added stream against 94 (59-66%), the Python heap 48-49 of it.
Next cuts, if wanted: bare aiohttp instead of httpx on top (httpx's `Request` and `Headers`,
about 2.5 KiB, estimated from the holders); aiohttp's two buffer deques after a burst (2 KiB);
the request's `input`/`params` decoded by the stdlib `json` (0.9 KiB)."""


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
            row(f"RSS growth / N, the probe before 2026-12-04 (a warm-up of {COLD_WARMUP_RUNNERS}, one batch: "
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
        lines += ["", REMAINS]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench storage")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sqlite", action="store_true", help="a temporary SQLite file instead of PostgreSQL")
    parser.add_argument("--only", choices=["memory"], default="", help="only the memory probes")
    parser.add_argument("--baseline", default="", help="another tree (e.g. a `git worktree` of an older "
                        "commit) whose relay the memory probes measure beside this one's")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        role_main(args.role, json.loads(args.config))
        return 0
    use_postgres = not args.sqlite and reachable(5432)
    res = run(args.quick, use_postgres, args.only, args.baseline)
    command = ("python -m bench storage" + (" --quick" if args.quick else "") + (" --sqlite" if args.sqlite else "")
               + (f" --only {args.only}" if args.only else "")
               + (f" --baseline {args.baseline}" if args.baseline else ""))
    report = render(res, command)
    print(report)
    if not args.quick and not args.only:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(report)
    elif not args.quick and RESULTS.exists():  # the memory section alone, the answers' kept
        kept = RESULTS.read_text().split("## Memory per in-flight stream")[0]
        RESULTS.write_text(kept + "\n".join(render_memory(res, command)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

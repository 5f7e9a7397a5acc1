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
* **memory per in-flight stream**: N runners at once in one process, each held just before the
  end of a 3,000-delta answer (the simulator stalls it), RSS growth / N (sampled every 0.5 s over
  WINDOW_S, the lease keeper trimming the allocator every malloc.TRIM_S) and, in a second process,
  the Python heap (tracemalloc) growth / N with its largest holders, against 2 x text + 64 KiB;
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
                "sim.stall_ms": "120000"}

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
    await stop(await batch(2))  # warm-up: import and cache everything a runner touches
    gc.collect()
    if tracing:
        tracemalloc.start(cfg.get("frames", 1))
    gc.collect()
    base_traced = tracemalloc.get_traced_memory()[0] if tracing else 0
    base_rss, base_alloc = rss_bytes(), _allocators()
    detail = cfg.get("detail", False)
    base_types = _type_counts() if detail else {}
    base_maps = _smaps() if detail else {}
    base_arenas = _arenas() if detail else []
    runners = await batch(n)
    gc.collect()
    # Sampled over a while, not once: the keeper trims every malloc.TRIM_S, wherever a sample falls.
    samples = []
    for _ in range(int(cfg.get("window", 0) / 0.5)):
        samples.append(rss_bytes() - base_rss)
        await asyncio.sleep(0.5)
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
    rss = rss_bytes() - base_rss
    samples.append(rss)
    keeper = hub.leases
    allocators = {k: (v - base_alloc.get(k, 0)) / n for k, v in _allocators().items()}
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
    return {"streams": n, "tokens": tokens, "tokens_per_s": pace, "tracemalloc": tracing,
            "per_stream": (traced if tracing else sum(samples) / len(samples)) / n,
            "per_stream_max": max(samples) / n, "trim_ms": trim_ms,
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
            for tracing in (False, True):
                for tree, root in trees:
                    cfg = {"simulator": sim_url, "streams": streams, "tokens": mem_tokens, "tokens_per_s": 100,
                           "tracemalloc": tracing, "window": 0 if tracing else WINDOW_S}
                    r = run_role("memory", cfg, dict(env, PYTHONPATH=root) if root else env, procs, timeout=400,
                                 script=bool(root))
                    r["tree"] = tree
                    results["memory"].append(r)
                    print(f"memory {tree} {streams} x {mem_tokens} deltas ({'tracemalloc' if tracing else 'RSS'}): "
                          f"{r['per_stream'] / KIB:,.0f} KiB/stream (max {r['per_stream_max'] / KIB:,.0f}), text "
                          f"{r['text_bytes'] / KIB:,.1f} KiB; per stream "
                          + ", ".join(f"{k} {v / KIB:,.0f} KiB" for k, v in r["allocators"].items()), flush=True)
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
What the RSS per stream is, and what was done (attribution: `cfg["detail"]` probes, at 50 streams):

- **The text, once**: 15 KiB (`textbuf`: the view's joined text).
- **The rest of the Python heap**, about 40 KiB: the stream's HTTP exchange, about 6 KiB (httpx's
  `Request` and `Headers` about 2.5, aiohttp's protocol, parser and `StreamReader` about 4: its
  two deques keep up to 16 freed blocks each after a burst, 2 KiB each here); the runner and its
  collaborators (the request's JSON `input` and `params` 0.9, the task's coroutines); the
  Response's fields for the snapshot (now a compact JSON str, about 1 KiB); and Django's and
  psycopg's per-process caches of query texts. Cut this round (side by side, 99 -> 88 KiB of RSS,
  58 -> 55 KiB of heap): the runner's two `asyncio.Event`s, each with a `deque` of waiters from
  the start (1.5 KiB; now `relay/flag.py`'s slotted `Flag`, a bool and a list only once something
  waits); the `response.created` Response's parsed dict tree, kept for the snapshot (2.2 KiB; now
  `orjson.dumps(...).decode()`, a str of the exact size, parsed again when a snapshot is made);
  the lease round's queries, whose text had one parameter per runner (`Q` pairs and `pk__in`), so
  psycopg cached a query text per runner count (it caches texts of up to 50 parameters, 128 of
  them) and the cache grew with the streams: on PostgreSQL they now take two `uuid[]` arrays, one
  text whatever the count (`services.leases_renew`; SQLite keeps the ORM's `Q`s). The RSS moved
  more than the heap (11 against 3 KiB); glibc's in-use and kept-free memory fell 2 and 4 KiB per
  stream (the lease texts, over 512 bytes and so glibc's, were rebuilt every 2 s among the churn);
  the cuts were not measured one by one for the RSS (a run with the first two alone: 99 -> 94). Cut the round
  before (tracemalloc by traceback, 12 frames, 50 streams, one probe after each cut: 78.6 -> 66.9
  -> 64.2 KiB of heap per stream; side by side: 67 -> 59): the last chunk read, which the
  four generators under httpx's `aiter_bytes` (httpx's two, httpx-aiohttp's, aiohttp's) each kept
  while the stream waited (up to httpx-aiohttp's 16 KiB reads, 9.3 KiB on average in that probe,
  however far behind the loop was at the stall): `upstream.body_chunks` reads aiohttp's buffer
  directly, keeping nothing between reads; the `ResponseRequest` model instance the runner held
  (1.5 KiB and its state; now `selectors.RunRequest`, 7 columns from `.values()`); the runner's
  `__dict__` (1.5 KiB: Python 3.11 gives an object with more than 30 attributes a real dict; now
  `__slots__`); a frozenset of the redacted fields per stream (0.8 KiB; now one per process).
  Cut before: a bound method per event type per assembler (the handler table, 7 KiB per stream,
  now one table for all); a Django `DatabaseWrapper` that every runner task built by asking
  `connection.vendor` on the event loop (`connection` is per task there, an asgiref `Local`;
  3 KiB); and the POST body: orjson's bytes keep a 4 KiB buffer however short the JSON, and the
  response keeps its request (4.1 KiB; now handed to httpx as str, which encodes it to exact bytes).
- **pymalloc's arenas beyond its blocks in use**, about 21 KiB per stream: pools that a few live
  objects pin among the churn's freed ones (82 KiB of arenas per stream three rounds ago, 61 now;
  `mallinfo2`'s arena figure is the high-water mark, not what is resident after the trim).
- **glibc's free memory kept**: the churn of streaming (chunks, events, patches) on the event loop,
  and the database threads' arenas (`malloc_info`: they grew about 45 KiB per stream here, 28 of
  them free, from the rounds that scale with N). The lease keeper now calls `malloc_trim(0)` every
  round (`responses_app/relay/malloc.py`; 0.1-0.2 ms a call at 50 streams, off nothing else), which
  gives those pages back; `mallinfo2` still counts them free.
- **Outside what tracemalloc counts**, about 30 KiB malloc'd per stream (glibc in use minus the
  heap's objects over 512 bytes; an estimate across two processes): `malloc_info` puts about
  16 KiB of glibc's in-use memory in the database threads' arenas (libpq results, the lease and
  writer rounds that scale with N). Not zstd (`zstandard.compress` is one-shot, on the writer's
  thread: no context is kept per stream), not TLS (loopback HTTP), not sockets (kernel memory, not
  RSS); the aiohttp C parser's state goes through Python's allocator and is in the heap above.
- Ruled out: `MALLOC_ARENA_MAX=2` with fixed mmap/trim thresholds (153 KiB against 155),
  asyncio reading 16 KiB per `recv` instead of 256 (151 against 147), `PYTHONMALLOC=malloc` (every
  object from glibc, with the keeper's trim: 134 KiB against 115 in the same run).

The target is met: 88 KiB against 94 (93%; the round before: 99 in the same run), 6 KiB of
margin, about what the RSS varies between runs (a first run of the Events and Response cuts alone
gave 94 against 99). What remains beyond twice the text: the heap's 40 KiB beyond the text once,
pymalloc's pinned pools and the 30 KiB malloc'd outside Python. Next cuts, if more margin is
wanted: bare aiohttp instead of httpx on top would save httpx's `Request` and `Headers` (about
2.5 KiB; estimated from the holders, not measured standalone); aiohttp's two buffer deques after
a burst (2 KiB); the request's `input`/`params` decoded by the stdlib `json` (0.9 KiB)."""


def render_memory(res: dict[str, Any], command: str) -> list[str]:
    """The memory section; `command`: when it was run on its own (`--only memory`)."""
    lines: list[str] = []
    mem = {(bool(m["tracemalloc"]), m.get("tree", "now")): m for m in res["memory"]}
    if mem:
        m = mem.get((False, "now")) or next(iter(mem.values()))
        text = m["text_bytes"]
        target = 2 * text + 64 * KIB
        trees = [t for t in ("before", "now") if (False, t) in mem or (True, t) in mem]
        lines += ["## Memory per in-flight stream", "",
                  f"{m['streams']} runners at once in one process, each held before the last deltas of a "
                  f"{m['tokens']}-delta answer ({text / KIB:.1f} KiB of text); growth / N, the RSS sampled every "
                  f"0.5 s for {WINDOW_S:.0f} s once they are held (mean, and the largest sample). Target 2 x text + "
                  f"64 KiB = {target / KIB:.0f} KiB. *before*: the relay before this change (`--baseline`), "
                  "measured in the same run." + (f" `{command}`, {res['database']}; "
                                                   f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}."
                                                   if command else ""), "",
                  "| per stream | " + " | ".join(trees) + " | now, of target |", "|---" * (len(trees) + 2) + "|"]

        def row(label: str, key: bool, field: str) -> None:
            cells = [f"{mem[(key, t)][field] / KIB:.0f} KiB" if (key, t) in mem and mem[(key, t)].get(field) is not None
                     else "" for t in trees]
            now = mem.get((key, "now"), {}).get(field)
            lines.append(f"| {label} | " + " | ".join(cells) + (f" | {now / target:.0%} |" if now else " | |"))

        row("RSS (mean)", False, "per_stream")
        row("RSS (largest sample)", False, "per_stream_max")
        row("RSS right after `malloc_trim(0)`", False, "trimmed")
        row("Python heap (tracemalloc, another process)", True, "per_stream")
        for t in trees:
            alloc = mem.get((False, t), {}).get("allocators") or {}
            if alloc:
                lines += ["", f"Where the RSS is, per stream, {t} (`mallinfo2`, pymalloc's statistics, before the "
                          f"probe's own trim): pymalloc's arenas {alloc.get('pymalloc_arenas', 0) / KIB:.0f} KiB, of "
                          f"which blocks in use {alloc.get('pymalloc_used', 0) / KIB:.0f} KiB; glibc malloc in use "
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

"""The storage benchmark's probes, each in a Django process of its own (`--role answer|memory`).

* `answer`: one StreamRunner streams a `sim-long` answer against the simulator; then what it
  stored: every checkpoint row's bytes as stored beside what the format before stored for the
  same rows (the whole view and the Response in every row, materialised from this run's rows),
  the event log's compressed batches beside their SSE text, and zstd's cost per KB.
* `memory`: after a warm-up that starts the process's thread pools (`WARMUP_RUNNERS`), N/2
  runners, then N/2 more beside them, each held just before the end of its answer (the simulator
  stalls it): the RSS (or, with `tracemalloc`, the Python heap) the second half added, per runner,
  and the growth / N from the base; where the RSS is (glibc's `mallinfo2`, pymalloc's
  statistics), the RSS right after `malloc_trim(0)` and that call's cost. `cfg["detail"]` (for a
  hand-run probe) adds the growth per object type, per mapping kind (`/proc/self/smaps`), per
  glibc arena (`malloc_info`) and, with `cfg["frames"]`, tracemalloc's largest holders by traceback.

Run by bench/storage.py, which also runs it against another tree's relay (`--baseline`): this
module and bench/ from this tree, responses_app from the other.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import sys
import threading
import time
from functools import partial
from typing import Any, TypeVar

from bench.harness import rss_bytes
from bench.probe import make_requests, setup_django

KIB = 1024
# The memory probe's warm-up: runners run (then stopped) before the base is taken, enough that every
# thread the process keeps (the database threads, the checkpoint writer) has started, so that the
# streams are not charged for the process's fixed cost (bench/README.md, "Memory per stream").
WARMUP_RUNNERS = 10
COLD_WARMUP_RUNNERS = 2  # the cold probe: the pools start inside the batch, as the probe first measured


# --- role: one answer, then what it stored ---------------------------------------------------------


async def _answer(cfg: dict[str, Any]) -> dict[str, Any]:
    import orjson
    from asgiref.sync import sync_to_async

    from responses_app import selectors, storage
    from responses_app.models import Checkpoint, EventRecord, ResponseRequest
    from responses_app.relay.hub import get_hub
    from responses_app.relay.stream_runner import StreamRunner

    metadata = {"sim.tokens": str(cfg["tokens"]), "sim.tokens_per_s": str(cfg["tokens_per_s"])}
    [request_id] = await sync_to_async(make_requests)(1, metadata, False)
    hub = get_hub()
    runner = StreamRunner(request_id, hub)
    started = time.monotonic()
    hub.spawn(request_id, lambda: runner)
    await asyncio.wait_for(runner.finished.wait(), timeout=cfg["tokens"] / cfg["tokens_per_s"] * 3 + 60)
    elapsed = time.monotonic() - started

    def measure() -> dict[str, Any]:
        request = ResponseRequest.objects.get(pk=request_id)
        rid = request.pk
        text = request.final_text.encode()
        rows = list(Checkpoint.objects.filter(request_id=rid).order_by("revision"))
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
        records = list(EventRecord.objects.filter(request_id=rid).values_list("data", "compressed"))
        log_now = sum(len(c) if c is not None else len(d.encode()) for d, c in records)
        log_before = sum(len(storage.log_bytes(d, c)) for d, c in records)
        assert selectors.event_log_text(request_id=rid).encode() == b"".join(
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


T = TypeVar("T")


def _same(value: T) -> T:
    return value


def _where(filename: str) -> str:
    """A source path relative to the tree whose relay runs here, or to site-packages."""
    import responses_app

    root = os.path.dirname(os.path.dirname(responses_app.__file__ or ""))
    return str(filename).replace(root + "/", "").split("site-packages/")[-1]


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
    from responses_app.relay.stream_runner import StreamRunner

    hub = get_hub()
    tokens, n, pace = cfg["tokens"], cfg["streams"], cfg["tokens_per_s"]
    # created, in_progress, item.added, part.added, then one delta per token: held before the last
    # few deltas, so each runner stays in flight with almost all of its text.
    stall_at = 4 + tokens - 5
    metadata = {"sim.tokens": str(tokens), "sim.tokens_per_s": str(pace), "sim.stall_at": str(stall_at),
                "sim.stall_ms": "180000"}  # the first half waits while the second streams

    async def batch(count: int) -> list[StreamRunner]:
        ids = await sync_to_async(make_requests)(count, metadata, False)
        runners = [StreamRunner(rid, hub) for rid in ids]
        for rid, runner in zip(ids, runners, strict=True):
            hub.spawn(rid, partial(_same, runner))
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
    # reused). `split` False: all N in one batch, the cold probe.
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

        selector_events._SelectorSocketTransport.max_size = int(os.environ["BENCH_RECV_MAX"])  # type: ignore[attr-defined]
    setup_django(cfg)
    result = asyncio.run(_answer(cfg) if role == "answer" else _memory(cfg))
    print(json.dumps(result))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.storage_probe")
    parser.add_argument("--role", choices=("answer", "memory"), required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    role_main(args.role, json.loads(args.config))
    return 0


if __name__ == "__main__":
    sys.exit(main())

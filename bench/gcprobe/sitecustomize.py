"""A benchmark probe, on PYTHONPATH of the server only when `--gc-log` is given: every garbage
collection of generation 1 or 2 that takes over 5 ms, as one line `wall-clock-start generation ms
collected cpu-ms thread` in $RELAY_BENCH_GC_LOG (a stall of the whole process shows up at the same moment as
every stream's lag rising together)."""

import gc
import os
import threading
import time

_path = os.environ.get("RELAY_BENCH_GC_LOG")
if _path:
    _out = open(_path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    _started = [0.0, 0.0, 0.0]
    _census = open(_path + ".census", "a", buffering=1) if os.environ.get("RELAY_BENCH_GC_CENSUS") else None  # noqa: SIM115

    def _probe(phase: str, info: dict) -> None:
        if phase == "start":
            _started[0], _started[1], _started[2] = time.perf_counter(), time.time(), time.thread_time()
        elif info["generation"] >= 1:
            ms = (time.perf_counter() - _started[0]) * 1000
            if ms > 5:
                cpu_ms = (time.thread_time() - _started[2]) * 1000
                _out.write(f"{_started[1]:.3f} {info['generation']} {ms:.1f} {info['collected']} {cpu_ms:.1f} "
                           f"{threading.current_thread().name}\n")
            if info["generation"] == 2 and os.environ.get("RELAY_BENCH_GC_CENSUS"):
                # what the full pass scanned, by type (slow: only when asked for)
                from collections import Counter

                objs = gc.get_objects()
                top = Counter(type(o).__qualname__ for o in objs).most_common(15)
                _census.write(  # type: ignore[union-attr]
                    f"{time.time():.3f} tracked {len(objs)} frozen {gc.get_freeze_count()} {top}\n")
                del objs

    gc.callbacks.append(_probe)

"""Giving the process's freed memory back to the system: glibc's `malloc_trim`.

glibc keeps what a stream's churn frees (its chunks, parsed events, patches) inside the heap
and reuses it, but does not return it: free but kept, it was a good share of the process's RSS
per in-flight stream (bench/README.md, storage). `malloc_trim(0)` returns the free pages of every
arena (the heap is not moved, nothing in use is touched), so the lease keeper calls it every
TRIM_S while the process runs streams and once when they have all ended (`bench storage`
measures the RSS and the call's cost). On a C library without it (musl), `trim()` does nothing.

May import: the standard library only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time

TRIM_S = 2.0  # how often the lease keeper trims while runners run (each of its rounds)


def _malloc_trim() -> ctypes._NamedFuncPointer | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


_trim = _malloc_trim()
AVAILABLE = _trim is not None


def trim() -> float:
    """Return the free memory at the top of every arena and each free page inside it to the
    system; the seconds it took (0.0 where there is no malloc_trim)."""
    if _trim is None:
        return 0.0
    started = time.perf_counter()
    _trim(0)
    return time.perf_counter() - started

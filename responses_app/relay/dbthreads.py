"""Database calls off the event loop, for the relay's long-lived tasks.

Runner writes use a small thread pool of their own, each thread keeping its connection
(CONN_MAX_AGE), so one slow commit never queues every stream behind it; the checkpoint writer
has one thread of its own (see `db_writer`). SQLite takes one writer at a time anyway: there,
everything runs on the one shared thread `sync_to_async` keeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

_db_executor: ThreadPoolExecutor | None = None
_writer_executor: ThreadPoolExecutor | None = None


def db_writer(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`db`, on one thread of its own, for the checkpoint writer: its rounds are the process's
    largest statements, and each thread's allocator keeps the peak it reached (glibc arenas).
    One thread keeps one such peak, where the shared pool would grow one in every thread."""
    global _writer_executor
    if _sqlite():
        return db(fn)
    if _writer_executor is None:
        _writer_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relay-writer")
    return sync_to_async(_reconnecting(fn), thread_sensitive=False, executor=_writer_executor)


def _sqlite() -> bool:
    # From the settings, not `connection.vendor`: on the event loop `connection` is per task (an
    # asgiref Local), so asking it built a DatabaseWrapper for every runner (4 KiB each, measured).
    return str(settings.DATABASES["default"]["ENGINE"]).endswith("sqlite3")


def _reconnecting(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (InterfaceError, OperationalError):
            # A kept connection went away (database restart, idle timeout): reconnect once.
            # The writes here are conditional updates or inserts that replays tolerate (events
            # are deduplicated by sequence number); a tool claim that did commit stays claimed.
            connection.close()
            return fn(*args, **kwargs)

    return call


def db(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as a coroutine function run on the relay's database threads."""
    global _db_executor
    if _sqlite():
        return sync_to_async(fn, thread_sensitive=True)
    if _db_executor is None:
        _db_executor = ThreadPoolExecutor(max_workers=settings.RELAY_DB_THREADS, thread_name_prefix="relay-db")
    return sync_to_async(_reconnecting(fn), thread_sensitive=False, executor=_db_executor)


def close_db_threads() -> None:
    """Close every runner database thread's connection and stop the threads (tests, shutdown)."""
    global _db_executor, _writer_executor
    pools = [(_db_executor, settings.RELAY_DB_THREADS), (_writer_executor, 1)]
    _db_executor = _writer_executor = None
    for executor, workers in pools:
        if executor is None:
            continue
        barrier = threading.Barrier(workers)

        def close(barrier: threading.Barrier = barrier) -> None:
            barrier.wait(timeout=10)  # every worker takes one: each closes its own connection
            connection.close()

        for future in [executor.submit(close) for _ in range(workers)]:
            future.result()
        executor.shutdown(wait=True)

"""Database calls off the event loop, for the relay's long-lived tasks.

Runner writes use a small thread pool of their own, each thread keeping its connection
(CONN_MAX_AGE), so one slow commit never queues every stream behind it; the checkpoint writer
has one thread of its own (see `db_writer`). SQLite takes one writer at a time anyway: there,
everything runs on the one shared thread `sync_to_async` keeps.

Websocket consumers (and the websocket auth path) use a small pool of their own (`ws_call`,
RELAY_WS_DB_THREADS): on asgiref's one thread-sensitive thread, in a burst of connects every
consumer's calls queued behind each other's, and each connect waited seconds (bench/README.md,
relay).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import DatabaseSyncToAsync
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from ..conf import app_settings

_db_executor: ThreadPoolExecutor | None = None
_writer_executor: ThreadPoolExecutor | None = None
_ws_executor: ThreadPoolExecutor | None = None


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
    # asgiref Local), so asking it built a DatabaseWrapper for every runner (bench/README.md, storage).
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
        _db_executor = ThreadPoolExecutor(max_workers=app_settings.DB_THREADS, thread_name_prefix="relay-db")
    return sync_to_async(_reconnecting(fn), thread_sensitive=False, executor=_db_executor)


def ws_call(fn: Callable[..., Any], *, database: bool = True) -> Callable[..., Any]:
    """`fn` as a coroutine function for a websocket consumer or the websocket auth path.

    On PostgreSQL it runs on the websocket pool (RELAY_WS_DB_THREADS threads), not on asgiref's one
    thread-sensitive thread, where every consumer's calls queued: a connect's half dozen calls
    (session and user, the request, the count, the snapshot, the socket slot) waited behind every
    other connect's. With `database` (the default) it keeps Channels' `database_sync_to_async`
    semantics: the thread's stale or obsolete connections are closed before and after the call, so
    after a database restart the next call reconnects, and with the pool (CONN_MAX_AGE 0) the
    connection goes back to the pool after every call: these threads hold none between calls.
    `database=False` is for the cache (socket slots, the cancel marker), which touches no database.
    On SQLite everything stays on the one shared thread, as before."""
    if _sqlite():
        return DatabaseSyncToAsync(fn) if database else sync_to_async(fn, thread_sensitive=True)
    global _ws_executor
    if _ws_executor is None:
        _ws_executor = ThreadPoolExecutor(max_workers=app_settings.WS_DB_THREADS, thread_name_prefix="relay-ws")
    if database:
        return DatabaseSyncToAsync(fn, thread_sensitive=False, executor=_ws_executor)
    return sync_to_async(fn, thread_sensitive=False, executor=_ws_executor)


def ws_db(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`ws_call(fn)` as a decorator (methods too): Channels' `@database_sync_to_async`, on the pool.
    The backend and the pool are looked up at each call."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        return await ws_call(fn)(*args, **kwargs)

    return call


def close_db_threads() -> None:
    """Close every relay database thread's connection and stop the threads (tests, shutdown)."""
    global _db_executor, _writer_executor, _ws_executor
    pools = [(_db_executor, app_settings.DB_THREADS), (_writer_executor, 1),
             (_ws_executor, app_settings.WS_DB_THREADS)]
    _db_executor = _writer_executor = _ws_executor = None
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

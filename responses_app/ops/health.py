"""`GET /healthz`: whether this process reaches its database and its channel layer.

200 `{"status": "ok", ...}` when both answer, 503 with the failing part's error otherwise; each
check is bounded by CHECK_TIMEOUT_S so a hung dependency fails the probe instead of holding it.
No authentication, no session or other write: one `SELECT 1`, and a PING of each Redis host
(or, for the in-memory layer, one message through a fresh channel).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.decorators.http import require_safe

CHECK_TIMEOUT_S = 3.0


def _database() -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connection.close()  # this thread's connection goes back to the pool (or is closed)


async def _channel_layer() -> None:
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer configured")
    if hasattr(layer, "connection") and hasattr(layer, "ring_size"):
        # Redis: PING every host. Not a message through the layer: a process's inbound messages
        # share one queue, and a probe queued behind a burst of patches would call a busy
        # process dead (and a load balancer would then move its viewers onto the others).
        for index in range(layer.ring_size):
            await layer.connection(index).ping()
        return
    channel = await layer.new_channel(prefix="healthz.")
    await layer.send(channel, {"type": "healthz"})
    message = await layer.receive(channel)
    if message.get("type") != "healthz":
        raise RuntimeError(f"unexpected message {message!r}")


async def _timed(check: Any) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            await check
    except TimeoutError:
        return {"ok": False, "error": f"no answer within {CHECK_TIMEOUT_S:g} s"}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 1)}


@require_safe
async def healthz(request: HttpRequest) -> JsonResponse:
    # Not the request's own (thread-sensitive) thread: with the database away, a pooled connect
    # waits DATABASE_POOL_TIMEOUT, and the request's end would wait for that thread too.
    database, layer = await asyncio.gather(_timed(sync_to_async(_database, thread_sensitive=False)()),
                                           _timed(_channel_layer()))
    ok = database["ok"] and layer["ok"]
    response = JsonResponse({"status": "ok" if ok else "unavailable", "database": database, "channel_layer": layer},
                            status=200 if ok else 503)
    response["Cache-Control"] = "no-store"
    return response


urlpatterns = [path("", healthz, name="healthz")]

"""The relay benchmark's database-writes probe (`python -m bench.relay --role writes`).

In a Django process of its own, one StreamRunner streams a 2,000-delta answer at one pace against
the simulator, and every statement that writes is counted: an `execute_wrapper` on every database
connection of the process, and each `COPY` the checkpoint writer sends on PostgreSQL (psycopg runs
it outside Django's wrappers). The runner's own counter is reported beside. Submit's own writes
(the conversation and the request rows) are counted apart.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
import time
from typing import Any

from bench.probe import make_requests


async def writes(cfg: dict[str, Any]) -> dict[str, Any]:
    from asgiref.sync import sync_to_async
    from django.db.backends.signals import connection_created

    from responses_app.relay.hub import get_hub
    from responses_app.relay.stream_runner import StreamRunner

    counts: dict[str, int] = {}
    total = {"writes": 0, "all": 0}
    table = re.compile(r'^(?:INSERT INTO|UPDATE|DELETE FROM)\s+"?(\w+)"?', re.I)

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        total["all"] += 1
        verb = sql.lstrip()[:6].upper()
        if verb in ("INSERT", "UPDATE", "DELETE"):
            total["writes"] += 1
            m = table.match(sql.lstrip())
            key = f"{verb} {m.group(1) if m else '?'}"
            counts[key] = counts.get(key, 0) + 1
            if os.environ.get("BENCH_TRACE_SQL"):
                print(threading.get_ident(), many, sql[:90], file=sys.stderr)
        return execute(sql, params, many, context)

    def install(sender: Any, connection: Any, **kwargs: Any) -> None:
        connection.execute_wrappers.append(wrapper)

    connection_created.connect(install)

    # On PostgreSQL the writer sends checkpoints and event batches as `COPY ... FROM STDIN`, which
    # psycopg runs outside Django's execute wrappers: one write per call, counted here.
    from django.db import connections

    from responses_app import storage

    insert_rows = storage.insert_rows

    def counted_insert_rows(model: Any, rows: list[dict[str, Any]], **kwargs: Any) -> None:
        if rows and connections["default"].vendor == "postgresql":
            total["writes"] += 1
            total["all"] += 1
            key = f"COPY {model._meta.db_table}"
            counts[key] = counts.get(key, 0) + 1
        insert_rows(model, rows, **kwargs)

    storage.insert_rows = counted_insert_rows  # type: ignore[assignment]

    def close_all() -> None:
        connections.close_all()

    await sync_to_async(close_all)()  # every connection from here on carries the counter
    tokens, pace = cfg["tokens"], cfg["tokens_per_s"]
    metadata = {"sim.tokens": str(tokens), "sim.tokens_per_s": str(pace)}
    [request_id] = await sync_to_async(make_requests)(1, metadata, cfg["background"])
    submit = dict(total)
    total.update(writes=0, all=0)
    counts.clear()
    hub = get_hub()
    runner = StreamRunner(request_id, hub)
    started = time.monotonic()
    hub.spawn(request_id, lambda: runner)
    await asyncio.wait_for(runner.finished.wait(), timeout=tokens / max(pace, 1) * 3 + 60)
    elapsed = time.monotonic() - started
    from responses_app.models import Checkpoint, EventRecord, ResponseRequest

    def facts() -> dict[str, Any]:
        request = ResponseRequest.objects.get(pk=request_id)
        return {"status": request.status, "checkpoints": Checkpoint.objects.filter(request_id=request.pk).count(),
                "event_batches": EventRecord.objects.filter(request_id=request.pk).count(),
                "events": request.events if hasattr(request, "events") else None}

    info = await sync_to_async(facts)()
    return {"tokens": tokens, "tokens_per_s": pace, "background": cfg["background"], "seconds": elapsed,
            "writes": total["writes"], "statements": total["all"], "by_kind": counts,
            "runner_counter": runner.writes, "submit_writes": submit["writes"], **info}

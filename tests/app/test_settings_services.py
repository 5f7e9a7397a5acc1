"""The dependency settings of a scaled-out process: the Redis client's read timeout
above channels_redis' blocking read, a pool big enough for load, a bounded PostgreSQL pool that
counts the runner's threads; bad values refused at start-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import asyncio, json, django
django.setup()
from django.conf import settings
from channels.layers import get_channel_layer
async def main():
    layer = get_channel_layer()
    if not hasattr(layer, "connection"):
        return {"db": settings.DATABASES["default"], "layer": type(layer).__name__}
    pool = layer.connection(0).connection_pool
    return {"brpop_timeout": layer.brpop_timeout, "socket_timeout": pool.connection_kwargs.get("socket_timeout"),
            "max_connections": pool.max_connections, "capacity": layer.capacity, "expiry": layer.expiry,
            "db": settings.DATABASES["default"]}
print(json.dumps(asyncio.run(main()), default=str))
"""


def settings_of(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "REDIS_", "RELAY_", "CHANNEL_"))}
    return subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**base, "DJANGO_SETTINGS_MODULE": "project.settings", "DJANGO_ENV": "development",
                               **env})


def probe(**env: str) -> dict[str, Any]:
    done = settings_of(**env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_redis_client_outlasts_the_layers_blocking_read_and_has_room() -> None:
    found = probe(REDIS_URL="redis://127.0.0.1:1/0", DATABASE_URL="postgres://u@127.0.0.1:1/x")
    assert found["socket_timeout"] > found["brpop_timeout"]
    assert found["max_connections"] >= 1000 and found["capacity"] >= 20000 and found["expiry"] == 30
    pool = found["db"]["OPTIONS"]["pool"]
    assert pool["max_size"] == 8 + 1 + 8 and found["db"]["CONN_MAX_AGE"] == 0


def test_the_url_still_overrides_and_the_pool_follows_the_runner_threads() -> None:
    found = probe(REDIS_URL="redis://127.0.0.1:1/0?socket_timeout=30", DATABASE_URL="postgres://u@127.0.0.1:1/x",
                  RELAY_DB_THREADS="4", DATABASE_POOL_MAX="12")
    assert found["socket_timeout"] == 30
    assert found["db"]["OPTIONS"]["pool"]["max_size"] == 12


def test_bad_values_are_refused() -> None:
    small = settings_of(DATABASE_URL="postgres://u@127.0.0.1:1/x", RELAY_DB_THREADS="8", DATABASE_POOL_MAX="5")
    assert small.returncode != 0 and "DATABASE_POOL_MAX must be at least" in small.stderr
    short = settings_of(REDIS_URL="redis://127.0.0.1:1/0", REDIS_SOCKET_TIMEOUT_S="5")
    assert short.returncode != 0 and "REDIS_SOCKET_TIMEOUT_S must exceed" in short.stderr


def test_sqlite_keeps_its_connections_and_no_pool() -> None:
    found = probe()
    assert "pool" not in found["db"].get("OPTIONS", {}) and found["db"]["CONN_MAX_AGE"] == 60
    assert found["layer"] == "InMemoryChannelLayer"

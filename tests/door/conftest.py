"""The one-door tests' fixtures (tests/door/harness.py): the recording simulator and the relay server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from responses_app.simulator.auth import DEV_API_KEY
from tests.door.harness import CAP, PATHS, PHRASE, PROPERTIES, ROOT, SETUP, TURNS, Door, Recorder
from tests.host.test_security_production import serve
from tests.servers import free_port, migrate, stop


@pytest.fixture(scope="package")
def upstream() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(recorder, host="127.0.0.1", port=port, lifespan="on",
                                           log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, name="recording-simulator", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the recording simulator did not start"
        time.sleep(0.02)
    try:
        yield recorder, f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="package")
def door(tmp_path_factory: pytest.TempPathFactory, upstream: tuple[Recorder, str]) -> Iterator[Door]:
    recorder, upstream_url = upstream
    tmp = tmp_path_factory.mktemp("door")
    env = {**os.environ, "DJANGO_ENV": "development", "DEBUG": "false",
           "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}", "SIMULATOR_ENABLED": "", "SIMULATOR_BASE_URL": "",
           "OPENAI_BASE_URL": upstream_url,
           "OPENAI_API_KEY": DEV_API_KEY, "REDIS_URL": "", "RELAY_ALLOWED_MODELS": "sim-text,sim-function",
           "RELAY_MAX_OUTPUT_TOKENS": str(CAP), "RELAY_SAFETY_PRECHECK": "true", "RELAY_SAFETY_RULES": PHRASE,
           "RELAY_MAX_CONCURRENT_PER_USER": "3", "RELAY_SUBMIT_RATE": "2/d", "RELAY_FLUSH_INTERVAL_MS": "20",
           "PYTHONUNBUFFERED": "1"}
    migrate(env)
    shell = subprocess.run([sys.executable, "manage.py", "shell", "-c", SETUP % {
        "properties": PROPERTIES, "paths": PATHS, "turns": TURNS}], cwd=ROOT, env=env, check=True,
        capture_output=True, text=True, timeout=180)
    users = json.loads(next(line for line in shell.stdout.splitlines() if line.startswith("SETUP "))[6:])
    proc, url = serve(env, tmp / "server.log")
    try:
        yield Door(url=url, db=tmp / "db.sqlite3", env=env, users=users, upstream=recorder, log=tmp / "server.log")
    finally:
        stop(proc)  # type: ignore[arg-type]

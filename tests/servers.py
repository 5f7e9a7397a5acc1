"""Real servers for tests: the standalone simulator in its own process, on a free port."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from responses_app.simulator.auth import DEV_API_KEY

ROOT = Path(__file__).resolve().parent.parent


def announced_address(proc: subprocess.Popen[Any], timeout_s: float) -> str:
    """The base URL a simulator started with `--port 0` prints as `SIMULATOR_LISTENING <url>`."""
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:  # keep draining so the child never blocks on a full pipe
            if line.startswith("SIMULATOR_LISTENING ") and not found:
                found.append(line.split()[1])
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(timeout_s) or not found:
        raise RuntimeError("the simulator did not announce its address")
    return found[0]


def start_simulator(deadline_s: float = 30.0, *args: str) -> tuple[subprocess.Popen[str], str]:
    """Start `python -m responses_app.simulator --port 0` (and `args`, e.g. --stateless); return the
    process and its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "responses_app.simulator", "--host", "127.0.0.1", "--port", "0", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + deadline_s
    try:
        url = announced_address(proc, deadline_s)
    except RuntimeError:
        proc.kill()
        raise
    while True:
        try:
            # the development key: what the relay sends, and what the simulator demands by default
            if httpx.get(f"{url}/models", headers={"authorization": f"Bearer {DEV_API_KEY}"},
                         timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError(f"the simulator at {url} never answered GET /models")
        time.sleep(0.05)


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def simulator_process() -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc, url = start_simulator()
    try:
        yield proc, url
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def simulator_url(simulator_process: tuple[subprocess.Popen[str], str]) -> str:
    """Base URL of a standalone simulator, e.g. http://127.0.0.1:PORT/v1."""
    return simulator_process[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_templates: dict[str, Path] = {}


def migrate(env: dict[str, str]) -> None:
    """`manage.py migrate --noinput` under `env`. On SQLite, the first call of this test process
    migrates a template and every call copies it (a migrate is 6 s of CPU alone, 10-15 s on CI's
    shared cores, and a server's fixture made one each time)."""
    url = env.get("DATABASE_URL", "")
    settings_module = env.get("DJANGO_SETTINGS_MODULE", "")
    if not url.startswith("sqlite:///"):
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True,
                       capture_output=True, timeout=180)
        return
    template = _templates.get(settings_module)
    if template is None:
        folder = Path(tempfile.mkdtemp(prefix="relay-migrated-"))
        atexit.register(shutil.rmtree, folder, True)
        template = folder / "db.sqlite3"
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, check=True,
                       env={**env, "DATABASE_URL": f"sqlite:///{template}"}, capture_output=True, timeout=180)
        _templates[settings_module] = template
    with closing(sqlite3.connect(template)) as source, \
            closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as target:
        source.backup(target)  # whole, whatever the journal mode


@contextmanager
def served(tmp: Path, setup: str, **settings: str) -> Iterator[dict[str, Any]]:
    """The demo's server (project.serve) with the embedded simulator, on a SQLite file of its own,
    after `setup` (a `manage.py shell` script that prints "SETUP <json>") made its users."""
    from tests.host.test_security_production import serve

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DJANGO_ENV": "development", "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
           "SIMULATOR_ENABLED": "true", "SIMULATOR_BASE_URL": f"{url}/simulator/v1", "OPENAI_BASE_URL": "",
           "OPENAI_API_KEY": "", "REDIS_URL": "", **settings, "PYTHONUNBUFFERED": "1"}
    migrate(env)
    shell = subprocess.run([sys.executable, "manage.py", "shell", "-c", setup], cwd=ROOT,
                           env=env, check=True, capture_output=True, text=True, timeout=120)
    users = json.loads(next(line for line in shell.stdout.splitlines() if line.startswith("SETUP "))[6:])
    proc, _ = serve(env, tmp / "server.log", port=port)
    try:
        yield {"url": url, "port": port, "users": users, "log": tmp / "server.log", "db": tmp / "db.sqlite3",
               "env": env}
    finally:
        stop(proc)  # type: ignore[arg-type]

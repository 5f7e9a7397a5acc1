"""What every benchmark that starts processes shares: processes, ports, databases, CPU accounting.

Nothing here measures anything by itself or imports the relay at module level; each benchmark
module builds on these pieces:

* ports and processes: `free_port`, `reachable`, `Procs` (every process in its own process group,
  all killed at the end), `start_simulator`, `start_server` over `ASGI_SERVERS`, `wait_idle`;
* databases: `database()` (a temporary PostgreSQL database, or a SQLite file), `make_session`,
  `django_env` (the environment a benchmark's Django processes run with);
* roles: `run_role` runs `python -m MODULE --role ROLE --config JSON` and returns its last line's JSON;
* CPU and memory from /proc: `cpu_seconds`, `main_thread_cpu`, `run_delay`, `rss_bytes`;
* figures: `pct` (nearest rank), `fmt_ms`, `environment` (the machine and library versions).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The settings a benchmark sets itself: never inherited from the shell that runs it.
OWN_SETTINGS = ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE", "OPENAI_API_KEY", "OPENAI_BASE_URL", "DEBUG")


# --- ports ---------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


# --- CPU and memory, from /proc ------------------------------------------------------------------


def cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """utime + stime of a whole process (all its threads) and of its live child processes (the
    workers of an ASGI server that forks them), from /proc/<pid>/stat; `reaped`: and of the
    children it waited for (cutime + cstime: PostgreSQL's backends that ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        own = sum(int(x) for x in fields[11:15 if reaped else 13]) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0
    children: set[int] = set()
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as f:
                children.update(int(c) for c in f.read().split())
    return own + sum(cpu_seconds(c) for c in children)


def main_thread_cpu(pid: int) -> float:
    """CPU seconds of a process's main thread alone (its event loop)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


def run_delay(pid: int) -> float:
    """Seconds a process's main thread (its event loop) has spent runnable but waiting for a CPU
    (/proc/<pid>/schedstat, field 2): how much of its lag the machine's other tenants caused."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_bytes(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# --- figures -------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile; nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def fmt_ms(value: float) -> str:
    return "–" if value != value else (f"{value:,.1f}" if value < 100 else f"{value:,.0f}")


def environment() -> str:
    """The machine and the versions that matter to a relay benchmark, in one line."""
    import channels
    import daphne
    import django
    import httpx
    import websockets

    cpu = "?"
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, Linux {platform.release()}; "
            f"Python {platform.python_version()}, Django {django.__version__}, Channels {channels.__version__}, "
            f"Daphne {daphne.__version__}, httpx {httpx.__version__}, websockets {websockets.__version__}")


# --- processes -----------------------------------------------------------------------------------


class Procs:
    """Processes started by this run, each in its own session/process group."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[Any]] = []

    def start(self, args: list[str], env: dict[str, str], cwd: Path = ROOT, **kw: Any) -> subprocess.Popen[Any]:
        proc = subprocess.Popen(args, cwd=cwd, env=env, start_new_session=True, **kw)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[Any], timeout: float = 10) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        else:  # its children, if any survived it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            self.stop(proc)


def start_simulator(procs: Procs, env: dict[str, str]) -> tuple[subprocess.Popen[Any], str]:
    """The standalone simulator on a free port; (process, its base URL)."""
    from tests.servers import announced_address

    proc = procs.start([PY, "-m", "responses_app.simulator", "--host", "127.0.0.1", "--port", "0"],
                       dict(env, PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    return proc, announced_address(proc, 30)


def _uvicorn(ws: str, loop: str = "asyncio") -> Callable[[str, int], list[str]]:
    return lambda app, port: ["-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port), "--http", "httptools",
                              "--ws", ws, "--loop", loop, "--lifespan", "off", "--no-access-log",
                              "--log-level", "warning"]


# The ASGI servers an application can be served with: name -> the arguments after `python`.
ASGI_SERVERS: dict[str, Callable[[str, int], list[str]]] = {
    # what the project ships (project/serve.py: uvicorn, httptools, websockets-sansio, uvloop)
    "project.serve": lambda app, port: ["-m", "project.serve", "--port", str(port), "--no-access-log"],
    "daphne": lambda app, port: ["-m", "daphne", "-b", "127.0.0.1", "-p", str(port), app],
    **{f"uvicorn+{ws}": _uvicorn(ws) for ws in ("websockets", "websockets-sansio", "wsproto")},
    **{f"uvicorn+{ws}+uvloop": _uvicorn(ws, "uvloop") for ws in ("websockets-sansio", "wsproto")},
    "hypercorn": lambda app, port: ["-m", "hypercorn", "-b", f"127.0.0.1:{port}", "--log-level", "warning", app],
    "granian": lambda app, port: ["-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port),
                                  "--workers", "1", "--loop", "asyncio", "--log-level", "warning", app],
}


def start_server(procs: Procs, app: str, env: dict[str, str], log: Path,
                 cwd: Path = ROOT, server: str = "daphne") -> tuple[subprocess.Popen[Any], int]:
    """Serve an ASGI application (`module:attribute`) on a free port, its output to `log`; returns
    once the port accepts connections."""
    port = free_port()
    out = open(log, "ab")  # noqa: SIM115 - closed with the process
    proc = procs.start([PY, *ASGI_SERVERS[server](app, port)], env,
                       stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    deadline = time.monotonic() + 30
    while not reachable(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{server} {app} did not start; see {log}")
        time.sleep(0.05)
    return proc, port


def wait_idle(pid: int, limit: float = 0.05, timeout: float = 20) -> float:
    """Wait until a process uses under `limit` of a core over 0.5 s; returns the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        c0 = cpu_seconds(pid)
        time.sleep(0.5)
        if cpu_seconds(pid) - c0 < limit * 0.5:
            break
    return time.monotonic() - start


def run_role(module: str, role: str, config: dict[str, Any], env: dict[str, str], procs: Procs,
             timeout: float, cwd: Path = ROOT) -> dict[str, Any]:
    """Run `python -m MODULE --role ROLE --config JSON` and return the JSON it prints last."""
    proc = procs.start([PY, "-m", module, "--role", role, "--config", json.dumps(config)], env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        procs.stop(proc)
        raise RuntimeError(f"{role} did not finish in {timeout:.0f}s") from None
    finally:
        procs.stop(proc)
    if proc.returncode != 0:
        raise RuntimeError(f"{role} failed ({proc.returncode}):\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


# --- databases and Django processes --------------------------------------------------------------


def base_env(**extra: str) -> dict[str, str]:
    """This process's environment without the settings a benchmark sets itself."""
    return {**{k: v for k, v in os.environ.items() if k not in OWN_SETTINGS}, **extra}


def django_env(env: dict[str, str], database_url: str, simulator_url: str, **extra: str) -> dict[str, str]:
    """Development settings with DEBUG off against the given database and simulator, and the per-user
    limits out of the way: one user drives every stream of a benchmark."""
    return {**env, "DJANGO_ENV": "development", "DEBUG": "false", "DATABASE_URL": database_url,
            "SIMULATOR_BASE_URL": simulator_url, "OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "LOG_LEVEL": "WARNING",
            "RELAY_MAX_CONCURRENT_PER_USER": "1000000", "RELAY_SUBMIT_RATE": "1000000/s",
            "RELAY_MAX_SOCKETS_PER_USER": "1000000", **extra}


@contextlib.contextmanager
def database(use_postgres: bool) -> Iterator[tuple[str, str]]:
    """A fresh database: (DATABASE_URL, description); dropped afterwards."""
    if use_postgres:
        import psycopg

        name = f"relay_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:  # type: ignore[arg-type]
            version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"postgres://postgres@127.0.0.1:5432/{name}", f"PostgreSQL {version} (local, temp database)"
        finally:
            with psycopg.connect(dbname="postgres", autocommit=True, **PG) as conn:  # type: ignore[arg-type]
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    else:
        with tempfile.TemporaryDirectory(prefix="relay-bench-") as tmp:
            yield f"sqlite:///{tmp}/bench.sqlite3", "SQLite (temp file)"


def migrate(env: dict[str, str], cwd: Path = ROOT) -> None:
    subprocess.run([PY, "manage.py", "migrate", "--noinput"], cwd=cwd, env=env, check=True, capture_output=True)


def make_session(env: dict[str, str], cwd: Path = ROOT) -> str:
    """A user `bench` and a logged-in session for it; the session key."""
    script = (
        "from django.contrib.auth import get_user_model; from django.contrib.sessions.backends.db import SessionStore;"
        "u = get_user_model().objects.create_user('bench', password='pw');"
        "s = SessionStore(); s['_auth_user_id'] = str(u.pk);"
        "s['_auth_user_backend'] = 'django.contrib.auth.backends.ModelBackend';"
        "s['_auth_user_hash'] = u.get_session_auth_hash(); s.create(); print(s.session_key)"
    )
    out = subprocess.run([PY, "manage.py", "shell", "-c", script], cwd=cwd, env=env, check=True,
                         capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


def keep_notes(path: Path, generated: str, marker: str = "\n## Notes") -> str:
    """`generated` followed by the notes of the file it replaces (everything from `marker` on), so a
    run replaces only what it generates; the text to write."""
    notes = ""
    if path.exists():
        old = path.read_text()
        at = old.find(marker)
        notes = "\n" + old[at + 1:] if at >= 0 else ""
    return generated + notes

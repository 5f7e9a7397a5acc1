"""The scaled-out layout in real processes, for `python -m bench scaled` and tests/scaled.

`Cluster` starts, on loopback and free ports: a private `redis-server` and a private PostgreSQL
cluster (initdb/pg_ctl from PG_BIN, run as the `postgres` user when we are root, data under
/tmp), the standalone simulator, P web processes (`python -m project.serve`) with
RELAY_INPROCESS_RUNNER=false and W `manage.py relayworker` processes; or, for `layout="embedded"`, the default one
process (SQLite, in-memory layer, in-process runner, the simulator mounted on the server).
Every process has its own process group and log file; `close()` kills them all and removes the
data directories, whatever happened. Redis and PostgreSQL can be stopped and started again on
the same port, and any process killed, to test what survives.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import PY, ROOT, Procs, cpu_seconds, free_port, make_session, reachable
from tests.servers import announced_address

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))


def _as_postgres() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def have_services() -> str | None:
    """Why the private services cannot be started here, or None."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed"
    if not (PG_BIN / "initdb").exists():
        return f"no PostgreSQL binaries in {PG_BIN}"
    return None


class PrivateRedis:
    """A redis-server of our own, with its default persistence (an RDB dump at shutdown)."""

    def __init__(self, tmp: Path, procs: Procs) -> None:
        self.port = free_port()
        self.dir = tmp / "redis"
        self.dir.mkdir()
        self.procs = procs
        self.proc: subprocess.Popen[Any] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        log = open(self.dir / "redis.log", "ab")  # noqa: SIM115 - closed with the process
        self.proc = self.procs.start(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--dir", str(self.dir), "--save", "3600 1"], dict(os.environ),
                                     stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not reachable(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start; see {self.dir / 'redis.log'}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.procs.stop(self.proc)
            self.proc = None


class PrivatePostgres:
    """A PostgreSQL cluster of our own: initdb into /tmp, pg_ctl start/stop on one port."""

    def __init__(self, tmp: Path, max_connections: int = 300) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="relay-pg-", dir="/tmp"))
        self.data = self.dir / "data"
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        self.max_connections = max_connections
        self._run(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-locale", "--no-sync")

    def _run(self, *args: str) -> None:
        subprocess.run([*_as_postgres(), *args], check=True, capture_output=True, cwd=self.dir)

    def url(self, dbname: str = "relay", **options: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in options.items())
        return f"postgres://postgres@127.0.0.1:{self.port}/{dbname}" + (f"?{query}" if query else "")

    def start(self) -> None:
        settings = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                    f"-c synchronous_commit=off -c full_page_writes=off -c max_connections={self.max_connections}")
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "postgres.log"), "-o", settings,
                  "-w", "-t", "30", "start")

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop")

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def query(self, sql: str, *params: Any, dbname: str = "relay") -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=dbname,
                             autocommit=True, connect_timeout=5) as conn:
            return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]

    def connections(self, dbname: str = "relay") -> dict[str, int]:
        """Open connections to the database by application_name (each process sets its own)."""
        rows = self.query("SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = %s "
                          "AND pid <> pg_backend_pid() GROUP BY 1", dbname, dbname=dbname)
        return {name or "?": int(count) for name, count in rows}

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Server:
    name: str
    kind: str  # web, worker, simulator
    proc: subprocess.Popen[Any]
    port: int | None = None
    cpu0: float = 0.0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class Cluster:
    layout: str = "scaled"  # or "embedded": one process, the defaults
    web: int = 2
    workers: int = 2
    env: dict[str, str] = field(default_factory=dict)  # extra settings for every Django process
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="relay-cluster-")))
    procs: Procs = field(default_factory=Procs)
    servers: dict[str, Server] = field(default_factory=dict)
    redis: PrivateRedis | None = None
    postgres: PrivatePostgres | None = None
    simulator_url: str = ""
    session: str = ""
    keep_logs: Path | None = None  # copy every process's log here on close

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Cluster:
        try:
            if self.layout == "embedded":
                self.base_env = self._django_env(database=f"sqlite:///{self.tmp}/relay.sqlite3")
                self._prepare(self.base_env)
                port = free_port()
                self.base_env["SIMULATOR_BASE_URL"] = f"http://127.0.0.1:{port}/simulator/v1"
                self.start_web("web-1", port=port)
                return self
            self.postgres = PrivatePostgres(self.tmp)
            self.postgres.start()
            self.postgres.create_database("relay")
            self.redis = PrivateRedis(self.tmp, self.procs)
            self.redis.start()
            sim = self.procs.start([PY, "-m", "responses_app.simulator", "--host", "127.0.0.1", "--port", "0"],
                                   dict(os.environ, PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
            self.simulator_url = announced_address(sim, 30)
            self.servers["simulator"] = Server("simulator", "simulator", sim,
                                               int(self.simulator_url.rsplit(":", 1)[1].split("/")[0]))
            self.base_env = self._django_env(database=self.postgres.url(), redis=self.redis.url())
            self.base_env["SIMULATOR_BASE_URL"] = self.simulator_url
            self.base_env["RELAY_INPROCESS_RUNNER"] = "false"
            self._prepare(self.base_env)
            for i in range(self.web):
                self.start_web(f"web-{i + 1}")
            for i in range(self.workers):
                self.start_worker(f"worker-{i + 1}")
            return self
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.procs.stop_all()
        if self.keep_logs is not None:
            self.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in self.tmp.glob("*.log"):
                shutil.copy(log, self.keep_logs / log.name)
        if self.postgres is not None:
            self.postgres.destroy()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _django_env(self, *, database: str, redis: str = "") -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "DATABASE_", "REDIS_"))}
        env.update({"DJANGO_ENV": "development", "DATABASE_URL": database, "REDIS_URL": redis, "OPENAI_BASE_URL": "",
                    "OPENAI_API_KEY": "", "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO",
                    # as in production: under DEBUG each thread's connection keeps its last 9,000
                    # queries, and every process grew by ~6 MB a minute (bench/README.md, chaos)
                    "DEBUG": "false",
                    # one load user drives every stream: the per-user limits would refuse it
                    "RELAY_MAX_CONCURRENT_PER_USER": "1000000", "RELAY_SUBMIT_RATE": "1000000/s",
                    "RELAY_MAX_SOCKETS_PER_USER": "1000000"})
        env.update(self.env)
        return env

    def _prepare(self, env: dict[str, str]) -> None:
        subprocess.run([PY, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True)
        self.session = make_session(env)

    def _env_for(self, name: str) -> dict[str, str]:
        env = dict(self.base_env)
        if self.postgres is not None:  # so pg_stat_activity tells the processes apart
            env["DATABASE_URL"] = self.postgres.url(application_name=name)
        return env

    def _log(self, name: str) -> Any:
        return open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process

    def start_web(self, name: str, port: int | None = None) -> Server:
        port = port or free_port()
        proc = self.procs.start([PY, "-m", "project.serve", "--port", str(port), "--no-access-log"],
                                self._env_for(name), stdout=self._log(name), stderr=subprocess.STDOUT)
        server = self.servers[name] = Server(name, "web", proc, port)
        deadline = time.monotonic() + 60
        while not reachable(port):
            if not server.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start:\n{self.log_tail(name)}")
            time.sleep(0.05)
        server.cpu0 = cpu_seconds(server.pid)
        return server

    def start_worker(self, name: str) -> Server:
        proc = self.procs.start([PY, "manage.py", "relayworker"], self._env_for(name),
                                stdout=self._log(name), stderr=subprocess.STDOUT)
        server = self.servers[name] = Server(name, "worker", proc)
        return server

    def ensure_running(self) -> list[str]:
        """Start again whatever died or was killed (Redis and PostgreSQL too); the names restarted."""
        restarted = []
        if self.redis is not None and (self.redis.proc is None or self.redis.proc.poll() is not None):
            self.redis.start()
            restarted.append("redis")
        if self.postgres is not None:
            try:
                self.postgres.query("SELECT 1")
            except Exception:
                self.postgres.start()
                restarted.append("postgres")
        for name, server in list(self.servers.items()):
            if not server.alive():
                if server.kind == "web":
                    self.start_web(name, port=server.port)
                elif server.kind == "worker":
                    self.start_worker(name)
                else:
                    raise RuntimeError(f"{name} died:\n{self.log_tail(name)}")
                restarted.append(name)
        return restarted

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        server = self.servers[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, sig)
        server.proc.wait(timeout=30)

    # --- looking at it ---------------------------------------------------------------------------

    def web_ports(self) -> list[int]:
        return [s.port for s in self.servers.values() if s.kind == "web" and s.port]

    def of_kind(self, kind: str) -> list[Server]:
        return [s for s in self.servers.values() if s.kind == kind]

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.tmp / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def logs(self, lines: int = 30) -> str:
        return "\n".join(f"--- {name}\n{self.log_tail(name, lines)}" for name in self.servers)

    def cpu(self) -> dict[str, float]:
        return {name: cpu_seconds(s.pid) for name, s in self.servers.items() if s.alive()}

    def streaming_workers(self) -> list[str]:
        """Workers with a simulator connection that received data in the last half second: the
        ones running a stream (an idle kept-alive connection has not)."""
        sim = self.servers["simulator"].port
        out = subprocess.run(["ss", "-tnpiH", "state", "established", "dst", f"127.0.0.1:{sim}"],
                             capture_output=True, text=True).stdout
        pids: set[int] = set()
        pid: int | None = None
        for line in out.splitlines():
            found = re.search(r"pid=(\d+)", line)
            if found:
                pid = int(found.group(1))
            lastrcv = re.search(r"lastrcv:(\d+)", line)
            if lastrcv and pid is not None and int(lastrcv.group(1)) < 500:
                pids.add(pid)
        return [s.name for s in self.of_kind("worker") if s.alive() and s.pid in pids]

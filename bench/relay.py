"""The relay benchmark: added latency, capacity beside a naive relay, writes per response.

    python -m bench relay            # ~7 minutes; prints the tables, writes bench/results/relay.md
    python -m bench relay --quick    # a smoke run: fewer, shorter steps; results file not written

Processes (all started here, each in its own process group, all killed in `finally`):

* the simulator (`python -m responses_app.simulator --port 0`), with `sim.stamp`: every text delta
  carries the wall-clock time it was queued for the wire, so a viewer computes receipt - emit;
* our relay: ONE server process (`python -m project.serve`: uvicorn, uvloop; `--server` picks another of
  ASGI_SERVERS), development settings, DEBUG off, the in-memory
  channel layer, the in-process runner) on a temporary PostgreSQL database (created, migrated,
  dropped here; a temporary SQLite file when PostgreSQL is not reachable);
* the naive relay (bench/naive_relay.py): ONE Daphne process;
* load clients (`python -m bench.relay --role load ...`): per step a coordinator and its load processes
  (`--role loadpart`, bench/loadgen.py: one receive loop each over its share of the websocket viewers);
* the database-write probes (`--role writes`): StreamRunners built directly in a Django process
  against the same simulator and database.

Memory per in-flight stream is `python -m bench storage --only memory` (bench/storage.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.loadgen import FLUSH_MIN_CHARS, STAMP, Window, stamped_min_chars
from bench.relay_cpu import VIEWERS, per_delta
from bench.relay_cpu import render as render_cpu
from tests.servers import announced_address

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "relay.md"
PY = sys.executable
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
CLK_TCK = os.sysconf("SC_CLK_TCK")
LAG_LIMIT_MS = 250.0


# --- small helpers ------------------------------------------------------------------------------


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


def cpu_seconds(pid: int) -> float:
    """utime + stime of a whole process (all its threads) and of its live child processes (the
    workers of an ASGI server that forks them), from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        own = (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0
    children: set[int] = set()
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as f:
                children.update(int(c) for c in f.read().split())
    return own + sum(cpu_seconds(c) for c in children)


def main_thread_cpu(pid: int) -> float:
    """CPU seconds of a process's main thread alone (its event loop, for Daphne)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_bytes(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile; nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def fmt_ms(value: float) -> str:
    return "–" if value != value else (f"{value:,.1f}" if value < 100 else f"{value:,.0f}")


# --- processes ----------------------------------------------------------------------------------


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
    proc = procs.start([PY, "-m", "responses_app.simulator", "--host", "127.0.0.1", "--port", "0"],
                       dict(env, PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    return proc, announced_address(proc, 30)


def _uvicorn(ws: str, loop: str = "asyncio") -> Callable[[str, int], list[str]]:
    return lambda app, port: ["-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port), "--http", "httptools",
                              "--ws", ws, "--loop", loop, "--lifespan", "off", "--no-access-log",
                              "--log-level", "warning"]


# ASGI servers the CPU section can serve the same Channels application with (`--asgi`).
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
    port = free_port()
    out = open(log, "ab")  # noqa: SIM115 - closed with the process
    proc = procs.start([PY, *ASGI_SERVERS[server](app, port)], env,
                       stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    deadline = time.monotonic() + 30
    while not reachable(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"daphne {app} did not start; see {log}")
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


def plain_chars_per_delta(sim_url: str, tokens: int = 2000) -> float:
    """The mean characters of a `sim-long` text delta without its stamp (one unpaced answer)."""
    import httpx
    import orjson

    from responses_app.simulator.auth import DEV_API_KEY

    body = {"model": "sim-long", "input": "Tell me something long.", "stream": True,
            "metadata": {"sim.tokens_per_s": "0", "sim.tokens": str(tokens), "sim.seed": "7"}}
    chars = deltas = 0
    with httpx.stream("POST", f"{sim_url}/responses", content=orjson.dumps(body), timeout=60,
                      headers={"content-type": "application/json", "authorization": f"Bearer {DEV_API_KEY}"}) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and '"response.output_text.delta"' in line:
                chars += len(orjson.loads(line[6:])["delta"])
                deltas += 1
    return chars / deltas if deltas else float("nan")


def to_created(db_url: str, since: float) -> dict[str, Any]:
    """Each request of a step, from its creation to the upstream's response.created (its start
    message, the lease, the POST upstream): whether a created request started at once (#13)."""
    if not db_url.startswith("postgres"):
        return {}
    import psycopg

    with psycopg.connect(dbname=db_url.rsplit("/", 1)[1], **PG) as conn:  # type: ignore[arg-type]
        rows = conn.execute("SELECT EXTRACT(EPOCH FROM upstream_created_at - created) FROM "
                            "responses_app_responserequest WHERE created >= to_timestamp(%s)", (since,)).fetchall()
    waits = [float(r[0]) for r in rows if r[0] is not None]
    return {"requests": len(rows), "never": len(rows) - len(waits), "p50": pct(waits, 50), "p99": pct(waits, 99),
            "max": max(waits, default=float("nan"))}


def make_session(env: dict[str, str], cwd: Path = ROOT) -> str:
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


def run_role(role: str, config: dict[str, Any], env: dict[str, str], procs: Procs,
             timeout: float) -> dict[str, Any]:
    """Run `python -m bench.relay --role ROLE` and return the JSON it prints last."""
    proc = procs.start([PY, "-m", "bench.relay", "--role", role, "--config", json.dumps(config)], env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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


# --- role: load (websocket viewers) -------------------------------------------------------------


# The window and its record are the load generator's (bench/loadgen.py), shared by both generators.


async def _received(ws: Any, win: Window) -> AsyncIterator[tuple[float, str | bytes]]:
    """(receipt time, message) from a websocket until the measurement window ends."""
    while (remaining := win.end - time.time()) > 0:
        try:
            async with asyncio.timeout(min(remaining, 5)):  # no task per message, unlike wait_for
                raw = await ws.recv()
        except TimeoutError:
            continue
        yield time.time(), raw


async def _viewer_ours(cfg: dict[str, Any], i: int, win: Window, http: Any, gate: asyncio.Semaphore,
                       ready: list[int], errors: list[str]) -> None:
    from websockets.asyncio.client import connect

    from responses_app.streaming.wire import PROTOCOL

    port, session = cfg["port"], cfg["session"]
    metadata = {"sim.tokens_per_s": str(cfg["tokens_per_s"]), "sim.tokens": str(cfg["tokens"]),
                "sim.seed": str(cfg["seed"] + i), "sim.stamp": "true"}
    async with gate:
        try:
            created = await http.post("/api/requests", json={
                "input": "Tell me something long.", "model": "sim-long", "client_request_id": uuid.uuid4().hex,
                "background": cfg["background"], "metadata": metadata})
            created.raise_for_status()
            request_id = created.json()["id"]
            sockets = [await connect(f"ws://127.0.0.1:{port}/ws/requests/{request_id}/?v={PROTOCOL}",
                                     origin=f"http://127.0.0.1:{port}", additional_headers={
                                         "Cookie": f"sessionid={session}"}, compression=None, proxy=None,
                                     open_timeout=30, ping_interval=None)
                       for _ in range(cfg.get("viewers", 1))]
        except Exception as exc:
            errors.append(f"setup: {type(exc).__name__}: {exc}"[:200])
            return
    # Every viewer of the request counts; the first one's flow marks the stream as flowing.
    await asyncio.gather(*(_watch_ours(ws, i if k == 0 else -1, win, ready, errors)
                           for k, ws in enumerate(sockets)))


async def _watch_ours(ws: Any, i: int, win: Window, ready: list[int], errors: list[str]) -> None:
    from responses_app.streaming.wire import appended, decode

    flowing = i < 0
    revision: int | None = None
    loads = decode  # patches arrive in the wire's form (streaming/wire.py)
    findall = STAMP.findall
    try:
        async for now, raw in _received(ws, win):
            message = loads(raw)
            kind = message.get("type")
            if kind == "snapshot":
                revision = message["revision"]
                continue
            if kind != "patch":
                continue
            measuring = win.start <= now < win.end
            if revision is not None and message["base"] != revision:
                if message["revision"] <= revision:
                    continue  # stale
                if measuring:
                    win.lost += message["base"] - revision
                    win.resyncs += 1
                await ws.send('{"type":"snapshot"}')  # what chat.js does on a gap
            revision = message["revision"]
            stamps = [float(s) for text in appended(message["ops"]) for s in findall(text)]
            if stamps and not flowing:
                flowing = True
                ready.append(i)  # deltas are flowing on this stream
            if not measuring:
                continue
            win.record(now, stamps)
    except Exception as exc:
        errors.append(f"recv: {type(exc).__name__}: {exc}"[:200])
    finally:
        # The explicit Stop, so the next step starts clean; then wait (bounded) for `terminal`.
        with contextlib.suppress(Exception):
            await ws.send('{"type":"cancel"}')
            async with asyncio.timeout(15):
                while True:
                    m = await ws.recv()
                    if '"type":"terminal"' in (m if isinstance(m, str) else m.decode()):
                        break
        with contextlib.suppress(Exception):
            await ws.close()


async def _viewer_naive(cfg: dict[str, Any], i: int, win: Window, gate: asyncio.Semaphore, ready: list[int],
                        errors: list[str]) -> None:
    import orjson
    from websockets.asyncio.client import connect

    port = cfg["port"]
    query = f"tokens_per_s={cfg['tokens_per_s']}&tokens={cfg['tokens']}&seed={cfg['seed'] + i}&stamp=1"
    async with gate:
        try:
            ws = await connect(f"ws://127.0.0.1:{port}/ws/naive/?{query}", compression=None, proxy=None,
                               open_timeout=30, ping_interval=None)
        except Exception as exc:
            errors.append(f"setup: {type(exc).__name__}: {exc}"[:200])
            return
    flowing = False
    last_seq: int | None = None
    loads = orjson.loads
    findall = STAMP.findall
    try:
        async for now, raw in _received(ws, win):
            message = loads(raw)
            last_seq = win.sequence(now, last_seq, message)
            if not flowing:
                flowing = True
                ready.append(i)
            if not win.start <= now < win.end:
                continue
            stamps = [float(s) for s in findall(message["delta"])]
            win.record(now, stamps)
    except Exception as exc:
        errors.append(f"recv: {type(exc).__name__}: {exc}"[:200])
    finally:
        with contextlib.suppress(Exception):
            await ws.close()


async def load_tasks(cfg: dict[str, Any]) -> dict[str, Any]:
    """The previous load generator (`--loadgen tasks`): websockets.asyncio, a receive loop per socket."""
    import httpx

    n = cfg["streams"]
    win = Window()
    ready: list[int] = []
    errors: list[str] = []
    gate = asyncio.Semaphore(cfg.get("ramp_concurrency", 16))
    token = "x" * 32
    http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{cfg['port']}", timeout=60,
                             cookies={"sessionid": cfg.get("session", ""), "csrftoken": token},
                             headers={"X-CSRFToken": token}, limits=httpx.Limits(max_connections=32))
    t_ramp = time.time()
    if cfg["target"] == "ours":
        tasks = [asyncio.create_task(_viewer_ours(cfg, i, win, http, gate, ready, errors)) for i in range(n)]
    else:
        tasks = [asyncio.create_task(_viewer_naive(cfg, i, win, gate, ready, errors)) for i in range(n)]
    # Ramp-up: every viewer connected (or failed), then a warm-up, then the measured window.
    deadline = time.time() + cfg.get("ramp_timeout", 90)
    while len(ready) + len([e for e in errors if e.startswith("setup")]) < n and time.time() < deadline:
        await asyncio.sleep(0.05)
    ramp = time.time() - t_ramp
    await asyncio.sleep(cfg["warmup"])
    pids = dict(cfg["pids"], load=os.getpid())
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    delay0 = {name: run_delay(pid) for name, pid in pids.items()}
    loop0 = main_thread_cpu(pids["server"])
    load0 = os.getloadavg()[0]
    from bench.loadgen import _lag_sampler

    lag_stats: dict[str, Any] = {}
    lag_task = _lag_sampler(lag_stats)
    win.start = time.time()
    win.end = win.start + cfg["window"]
    spy = None
    if cfg.get("profile"):  # py-spy on the server over the measured window (this process's CPU is not the server's)
        spy = subprocess.Popen([str(Path(PY).parent / "py-spy"), "record", "--pid", str(pids["server"]),
                                "--duration", str(int(cfg["window"])), "--rate", "200", "--nonblocking",
                                "--format", cfg["profile"]["format"], "-o", cfg["profile"]["path"]],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    await asyncio.sleep(cfg["window"])
    elapsed = time.time() - win.start
    cpu = {name: (cpu_seconds(pid) - cpu0[name]) / elapsed for name, pid in pids.items()}
    delay = {name: (run_delay(pid) - delay0[name]) / elapsed for name, pid in pids.items()}
    cpu["server_loop"] = (main_thread_cpu(pids["server"]) - loop0) / elapsed
    lag_task.cancel()
    own_lags = lag_stats.get("loop_lag_ms", [])
    loadavg = (load0 + os.getloadavg()[0]) / 2
    async with asyncio.timeout(40):
        await asyncio.gather(*tasks, return_exceptions=True)
    if spy is not None:
        spy.wait(30)
    await http.aclose()
    expected = len(ready) * cfg["tokens_per_s"] * cfg["window"]
    cpu["load_procs"] = 1
    return {
        "target": cfg["target"], "streams": n, "connected": len(ready), "ramp_s": ramp, "window_s": elapsed,
        "messages": win.messages, "deltas": win.deltas, "lost": win.lost, "resyncs": win.resyncs,
        "expected_deltas": expected,
        "delivered": (win.deltas / (win.deltas + win.lost)) if win.deltas + win.lost else 0.0,
        "rate": win.deltas / expected if expected else 0.0,
        "newest": {f"p{q}": pct(win.newest, q) for q in (50, 90, 99)} | {"max": max(win.newest, default=float("nan"))},
        "oldest": {f"p{q}": pct(win.oldest, q) for q in (50, 90, 99)} | {"max": max(win.oldest, default=float("nan"))},
        "cpu": cpu, "run_delay": delay, "loadavg": loadavg,
        "load_loop_lag_ms": {"p99": pct(own_lags, 99), "max": max(own_lags, default=float("nan"))},
        "load_us_per_frame": cpu["load"] * elapsed / max(win.messages, 1) * 1e6,
        "errors": errors[:5], "error_count": len(errors),
    }


SERVER_LAG_SERIES: list[tuple[float, float]] = []


def run_delay(pid: int) -> float:
    """Seconds a process's main thread (its event loop) has spent runnable but waiting for a CPU
    (/proc/<pid>/schedstat, field 2): how much of its lag the machine's other tenants caused."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


async def _sample_loop_lag(port: int, out: list[float], t0: float, period: float = 0.1) -> None:
    """The server's own loop-lag gauge (the pacer's input, relay_event_loop_lag_seconds), from /metrics."""
    import httpx

    pattern = re.compile(rb"^relay_event_loop_lag_seconds\S* (\S+)$", re.M)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
        while True:
            with contextlib.suppress(Exception):
                found = pattern.search((await http.get("/metrics")).content)
                if found:
                    out.append(float(found.group(1)) * 1000)
                    SERVER_LAG_SERIES.append((round(time.time() - t0, 2), out[-1]))
            await asyncio.sleep(period)


async def _control(cfg: dict[str, Any], out: list[tuple[float, float]]) -> None:
    """Streams read straight from the simulator (no relay), their deltas' (receipt time, receipt - emit):
    the lag the simulator, the machine and the load side add by themselves, at the same moments."""
    import httpx
    import orjson

    from responses_app.simulator.auth import DEV_API_KEY

    async def one(i: int) -> None:
        body = {"model": "sim-long", "input": "Tell me something long.", "stream": True, "metadata": {
            "sim.tokens_per_s": str(cfg["tokens_per_s"]), "sim.tokens": str(cfg["tokens"]),
            "sim.seed": str(cfg["seed"] + 10**6 + i), "sim.stamp": "true"}}
        async with client.stream("POST", f"{cfg['simulator']}/responses", content=orjson.dumps(body),
                                 headers={"content-type": "application/json"}) as response:
            async for chunk in response.aiter_bytes():
                now = time.time()
                out.extend((now, (now - float(s)) * 1000) for s in STAMP.findall(chunk.decode(errors="replace")))

    async with httpx.AsyncClient(timeout=None, headers={"authorization": f"Bearer {DEV_API_KEY}"}) as client:
        await asyncio.gather(*(one(i) for i in range(cfg["control"])), return_exceptions=True)


async def load(cfg: dict[str, Any]) -> dict[str, Any]:
    """The step's viewers in `load_procs` processes (bench/loadgen.py: one receive loop each), started,
    ramped up, then given one window start; this coordinator measures every process's CPU over it."""
    if cfg.get("loadgen") == "tasks":
        return await load_tasks(cfg)
    n, k = cfg["streams"], max(1, min(cfg.get("load_procs", 2), cfg["streams"]))
    shares = [n // k + (1 if j < n % k else 0) for j in range(k)]
    firsts = [sum(shares[:j]) for j in range(k)]
    control: list[tuple[float, float]] = []
    controller = asyncio.create_task(_control(cfg, control)) if cfg.get("control") else None
    t_ramp = time.time()
    outs = tempfile.mkdtemp(prefix="relay-load-")  # results by file: a pipe's 64 KiB could cut them short
    children = [await asyncio.create_subprocess_exec(
        PY, "-m", "bench.relay", "--role", "loadpart", "--config",
        json.dumps(dict(cfg, streams=shares[j], first=firsts[j], coordinated=True, out=f"{outs}/{j}.json",
                        ramp_concurrency=max(2, cfg.get("ramp_concurrency", 16) // k))),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, limit=2**26) for j in range(k)]
    try:
        async with asyncio.timeout(cfg.get("ramp_timeout", 90) + 30):
            readies = [json.loads(await c.stdout.readline()) for c in children]  # type: ignore[union-attr]
    except Exception:
        for c in children:
            with contextlib.suppress(ProcessLookupError):
                c.kill()
        errs = [(await c.communicate())[1].decode()[-1500:] for c in children]
        raise RuntimeError(f"load processes did not ramp up: {errs}") from None
    ramp = time.time() - t_ramp
    start_at = time.time() + cfg["warmup"]
    for c in children:
        c.stdin.write(f"{start_at}\n".encode())  # type: ignore[union-attr]
        await c.stdin.drain()  # type: ignore[union-attr]
    await asyncio.sleep(start_at - time.time())
    pids = dict(cfg["pids"], **{f"load{j}": c.pid for j, c in enumerate(children)})
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    delay0 = {name: run_delay(pid) for name, pid in pids.items()}
    loop0 = main_thread_cpu(pids["server"])
    load0, t0 = os.getloadavg()[0], time.time()
    server_lag: list[float] = []
    # Only where its figures are shown (capacity): each scrape of /metrics costs the server about 4 ms
    # of CPU, which at 10 a second was 15-27 µs per relayed delta in the CPU section's rows (issue #13).
    sampler = asyncio.create_task(_sample_loop_lag(cfg["port"], server_lag, start_at)) \
        if cfg["target"] == "ours" and cfg.get("sample_lag") else None
    await asyncio.sleep(cfg["window"])
    elapsed = time.time() - t0
    cpu = {name: (cpu_seconds(pid) - cpu0[name]) / elapsed for name, pid in pids.items()}
    delay = {name: (run_delay(pid) - delay0[name]) / elapsed for name, pid in pids.items()}
    cpu["server_loop"] = (main_thread_cpu(pids["server"]) - loop0) / elapsed
    cpu["load"] = sum(cpu.pop(f"load{j}") for j in range(k))
    delay["load"] = max(delay.pop(f"load{j}") for j in range(k))
    cpu["load_procs"] = k
    if sampler is not None:
        sampler.cancel()
    if controller is not None:
        controller.cancel()
    control_lags = [lag for at, lag in control if start_at <= at < start_at + cfg["window"]]
    control_worst = sorted(((lag, round(at - start_at, 2)) for at, lag in control
                            if start_at <= at < start_at + cfg["window"]), reverse=True)[:5]
    parts = []
    for c in children:
        out, err = await c.communicate()
        if c.returncode != 0:
            raise RuntimeError(f"load process failed ({c.returncode}):\n{err.decode()[-3000:]}")
        parts.append(json.loads(Path(outs, f"{len(parts)}.json").read_text()))
    shutil.rmtree(outs, ignore_errors=True)
    newest = [x for p in parts for x in p["newest_ms"]]
    oldest = [x for p in parts for x in p["oldest_ms"]]
    deltas, lost = sum(p["deltas"] for p in parts), sum(p["lost"] for p in parts)
    connected = sum(p["connected"] for p in parts)
    first_views = [x for p in parts for x in p["first_view_s"]]
    bursts = [x for p in parts for x in (p.get("burst") or {}).get("first_view_s", [])]
    errors = [e for p in parts for e in p["errors"]]
    expected = connected * cfg["tokens_per_s"] * cfg["window"]
    # When the lag happened: per 100 ms of receipt time, the messages and their worst lag (a stall of
    # the whole server shows as every stream's lag rising at once; the worst buckets are reported).
    buckets: dict[int, list[float]] = {}
    for p in parts:
        for at, lag in zip(p["at"], p["newest_ms"], strict=True):
            b = buckets.setdefault(int((at - start_at) * 10), [0, 0.0, 0])
            b[0] += 1
            b[1] = max(b[1], lag)
            b[2] += lag > LAG_LIMIT_MS
    worst = sorted(((v[1], k / 10, v[0], v[2]) for k, v in buckets.items()), reverse=True)[:8]
    per_frame = [p["cpu"] / max(p["messages"], 1) * elapsed * 1e6 for p in parts]
    return {
        "target": cfg["target"], "streams": n, "connected": connected, "ramp_s": ramp, "window_s": elapsed,
        "start_at": start_at, "messages": sum(p["messages"] for p in parts), "deltas": deltas, "lost": lost,
        "resyncs": sum(p["resyncs"] for p in parts), "expected_deltas": expected,
        "delivered": deltas / (deltas + lost) if deltas + lost else 0.0,
        "rate": deltas / expected if expected else 0.0,
        "newest": {f"p{q}": pct(newest, q) for q in (50, 90, 99)} | {"max": max(newest, default=float("nan"))},
        "oldest": {f"p{q}": pct(oldest, q) for q in (50, 90, 99)} | {"max": max(oldest, default=float("nan"))},
        "cpu": cpu, "run_delay": delay, "loadavg": (load0 + os.getloadavg()[0]) / 2,
        "load_loop_lag_ms": {"p99": max(p["loop_lag_ms"]["p99"] for p in parts),
                             "max": max(p["loop_lag_ms"]["max"] for p in parts)},
        "load_us_per_frame": sum(per_frame) / len(per_frame),
        "server_loop_lag_ms": {"p50": pct(server_lag, 50), "max": max(server_lag, default=float("nan"))},
        "server_lag_series": SERVER_LAG_SERIES,
        "worst_100ms": [{"at_s": at, "max_ms": m, "messages": c, "over_limit": o} for m, at, c, o in worst],
        "over_limit": sum(v[2] for v in buckets.values()),
        "control": {"streams": cfg.get("control", 0), "deltas": len(control_lags), "p50": pct(control_lags, 50),
                    "p99": pct(control_lags, 99), "max": max(control_lags, default=float("nan")),
                    "worst": control_worst},
        "ready": readies, "errors": errors[:5], "error_count": len(errors),
        "first_view": {"sockets": len(first_views), "none": sum(p["no_first_view"] for p in parts),
                       "p50": pct(first_views, 50), "p99": pct(first_views, 99),
                       "max": max(first_views, default=float("nan"))},
        "burst": {"sockets": len(bursts), "failed": sum((p.get("burst") or {}).get("failed", 0) for p in parts),
                  "p50": pct(bursts, 50), "p99": pct(bursts, 99), "max": max(bursts, default=float("nan"))}
        if cfg.get("burst") else {},
    }


# --- roles in a Django process: database writes -----------------------------------------------


def _django(cfg: dict[str, Any]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.conf import settings

    settings.RELAY_SIMULATOR_BASE_URL = cfg["simulator"]
    settings.RELAY_UPSTREAM_BASE_URL = ""
    settings.RELAY_UPSTREAM_API_KEY = ""


def _make_requests(n: int, metadata: dict[str, str], background: bool) -> list[str]:
    from django.contrib.auth import get_user_model

    from responses_app import services

    user, _ = get_user_model().objects.get_or_create(username=f"probe-{uuid.uuid4().hex[:6]}")
    # Seeds unique to this call: the simulator derives response ids from the seed, and another
    # probe may run at the same time against the same simulator.
    seed = uuid.uuid4().int >> 80
    ids = []
    for i in range(n):
        conversation = services.conversation_create(owner=user)
        request, _ = services.request_create(
            owner=user, input="Tell me something long.", model="sim-long", client_request_id=uuid.uuid4().hex,
            conversation=conversation,
            params={"background": background, "metadata": dict(metadata, **{"sim.seed": str(seed + i)})})
        ids.append(str(request.pk))
    return ids


async def _writes(cfg: dict[str, Any]) -> dict[str, Any]:
    from asgiref.sync import sync_to_async
    from django.db.backends.signals import connection_created

    from responses_app.relay.hub import get_hub
    from responses_app.relay.runner import StreamRunner

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
    [request_id] = await sync_to_async(_make_requests)(1, metadata, cfg["background"])
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
        return {"status": request.status, "checkpoints": Checkpoint.objects.filter(request_id=request_id).count(),
                "event_batches": EventRecord.objects.filter(request_id=request_id).count(),
                "events": request.events if hasattr(request, "events") else None}

    info = await sync_to_async(facts)()
    return {"tokens": tokens, "tokens_per_s": pace, "background": cfg["background"], "seconds": elapsed,
            "writes": total["writes"], "statements": total["all"], "by_kind": counts,
            "runner_counter": runner.writes, "submit_writes": submit["writes"], **info}


def role_main(role: str, cfg: dict[str, Any]) -> None:
    if role == "load":
        result = asyncio.run(load(cfg))
    elif role == "loadpart":
        from bench.loadgen import run as loadpart

        result = loadpart(cfg)
    elif role == "floor":
        from bench.relay_cpu import floor

        if cfg.get("loop") == "uvloop":
            import uvloop

            result = uvloop.run(floor(cfg))
        else:
            result = asyncio.run(floor(cfg))
    else:
        _django(cfg)
        result = asyncio.run(_writes(cfg))
    print(json.dumps(result))


# --- the orchestration --------------------------------------------------------------------------


@dataclass
class Plan:
    steps: list[int]
    window: float
    warmup: float
    latency_streams: int = 5
    latency_window: float = 10.0
    tokens_per_s: int = 30
    writes_paces: tuple[int, ...] = (30, 100, 200)
    writes_tokens: int = 2000
    background: bool = False
    sections: tuple[str, ...] = ("latency", "cpu", "capacity", "writes")
    cpu_streams: int = 100
    cpu_window: float = 10.0
    baseline: str = ""  # another checkout, whose server is measured beside ours in the CPU section
    server: str = "project.serve"  # the ASGI server ours runs on (ASGI_SERVERS)
    baseline_server: str = "daphne"  # and the baseline checkout's
    baseline_env: dict[str, str] = field(default_factory=dict)  # and its environment (RELAY_COMPILED=false)
    cpu_rounds: int = 1
    targets: tuple[str, ...] = ("ours", "naive")  # the capacity section's relays
    asgi: tuple[str, ...] = ()  # more ASGI servers for our application, measured beside ours in the CPU section
    loadgen: str = "loop"  # "loop": bench/loadgen.py, one receive loop per load process; "tasks": the previous one
    load_procs: int = 2  # load processes per step (loadgen "loop")
    gc_log: bool = False  # log our server's slow garbage collections (bench/gcprobe)
    control: int = 8  # streams the load coordinator reads straight from the simulator, beside the relay's
    burst: bool = False  # after each capacity step's ramp-up, one more socket per stream, all at once
    profile: bool = False  # py-spy flame graph + collapsed stacks of our server, 1 viewer, CPU section's load
    flush_as_stamped: bool = False  # RELAY_FLUSH_MIN_CHARS's default with stamped deltas (every run before 2026-12-03)


def run(plan: Plan, use_postgres: bool, log_dir: Path) -> dict[str, Any]:
    procs = Procs()
    results: dict[str, Any] = {"latency": {}, "capacity": {"ours": [], "naive": []}, "writes": [],
                               "cpu": {"rows": [], "floor": []}}
    base_env = {k: v for k, v in os.environ.items()
                if k not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE", "OPENAI_API_KEY",
                             "OPENAI_BASE_URL", "DEBUG")}
    base_env["PYTHONUNBUFFERED"] = "1"
    tokens = int(plan.tokens_per_s * 120)  # lasts far beyond any step; every step stops its streams
    t_start = time.monotonic()
    with database(use_postgres) as (db_url, db_desc), contextlib.ExitStack() as databases:
        results["database"] = db_desc
        try:
            sim, sim_url = start_simulator(procs, base_env)
            # Every relay of ours (and the baseline) waits for as many more characters as the stamps
            # add, so its patches carry as many deltas as for the same text unstamped (loadgen.py);
            # `--flush-as-stamped` keeps the default, as every run before 2026-12-03 measured.
            plain = plain_chars_per_delta(sim_url)
            min_chars = FLUSH_MIN_CHARS if plan.flush_as_stamped else stamped_min_chars(plain)
            results["flush"] = {"plain_chars_per_delta": plain, "min_chars": min_chars}
            relay_flush = {"RELAY_FLUSH_MIN_CHARS": str(min_chars)}
            # development settings with DEBUG off, and the per-user limits out of the way: one user
            # drives every stream of the benchmark
            env = dict(base_env, DJANGO_ENV="development", DEBUG="false", DATABASE_URL=db_url,
                       SIMULATOR_BASE_URL=sim_url, OPENAI_BASE_URL="", OPENAI_API_KEY="", LOG_LEVEL="WARNING",
                       RELAY_MAX_CONCURRENT_PER_USER="1000000", RELAY_SUBMIT_RATE="1000000/s",
                       RELAY_MAX_SOCKETS_PER_USER="1000000")
            subprocess.run([PY, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True,
                           capture_output=True)

            def own_database(cwd: Path) -> dict[str, str]:
                """Every relay server a database of its own: with the in-memory layer a server's
                sweep would otherwise take another's requests whose start is late (pending over
                10 s) and stream them where their viewers never hear of them (issue #13). Ours too,
                not the run's first database (the probes' below): on that one, measured A/A, the
                same tree read 3-8% more CPU per relayed delta than on a database made as the
                others are (bench/results/relay.md)."""
                extra_env = dict(env, DATABASE_URL=databases.enter_context(database(use_postgres))[0])
                subprocess.run([PY, "manage.py", "migrate", "--noinput"], cwd=cwd, env=extra_env, check=True,
                               capture_output=True)
                return extra_env

            ours_env = own_database(ROOT)
            session = make_session(ours_env)
            server_env = dict(ours_env, **relay_flush)
            if plan.gc_log:  # the GC probe (bench/gcprobe) in our server only
                server_env = dict(server_env, RELAY_BENCH_GC_LOG=str(log_dir / "gc.log"),
                                  PYTHONPATH=os.pathsep.join([str(ROOT / "bench" / "gcprobe"),
                                                              env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
                results["gc_log"] = str(log_dir / "gc.log")
            ours, ours_port = start_server(procs, "project.asgi:application", server_env, log_dir / "ours.log",
                                           server=plan.server)
            naive_env = dict(base_env, NAIVE_UPSTREAM=sim_url)
            # The bare relay sends at least as many frames as ours (bench/bare_relay.py, its default
            # for patches sized as production's).
            bare_env = dict(naive_env, BARE_DELTAS_PER_FRAME="2") if plan.flush_as_stamped else naive_env
            naive, naive_port = start_server(procs, "bench.naive_relay:application", naive_env,
                                             log_dir / "naive.log")
            servers = {"ours": (ours, ours_port), "naive": (naive, naive_port)}
            if "cpu" in plan.sections:  # the lower bound of the CPU section (bench/bare_relay.py)
                servers["bare"] = start_server(procs, "bench.bare_relay:application", bare_env,
                                               log_dir / "bare.log", server="uvicorn+websockets-sansio+uvloop")
            sessions = {"ours": session}
            db_urls = {"ours": ours_env["DATABASE_URL"]}

            def start_extra(target: str) -> None:
                """A server the CPU section compares ours with, one at a time (each holds a database pool)."""
                if target == "before":
                    before_env = {**own_database(Path(plan.baseline)), **relay_flush, **plan.baseline_env}
                    sessions[target] = make_session(before_env, cwd=Path(plan.baseline))
                    db_urls[target] = before_env["DATABASE_URL"]
                    if plan.gc_log:
                        before_env = dict(server_env, RELAY_BENCH_GC_LOG=str(log_dir / "gc-before.log"),
                                          DATABASE_URL=before_env["DATABASE_URL"], **plan.baseline_env)
                        results["gc_log_before"] = str(log_dir / "gc-before.log")
                    servers[target] = start_server(procs, "project.asgi:application", before_env,
                                                   log_dir / "before.log",
                                                   cwd=Path(plan.baseline), server=plan.baseline_server)
                else:
                    extra_env = dict(own_database(ROOT), **relay_flush)
                    sessions[target] = make_session(extra_env)
                    db_urls[target] = extra_env["DATABASE_URL"]
                    servers[target] = start_server(procs, "project.asgi:application", extra_env,
                                                   log_dir / f"{target}.log", server=target)

            def step(target: str, streams: int, window: float, warmup: float, viewers: int = 1,
                     profile: dict[str, str] | None = None, sample_lag: bool = False) -> dict[str, Any]:
                proc, port = servers[target]
                wait_idle(proc.pid)
                cfg = {"target": "naive" if target in ("naive", "bare") else "ours", "port": port,
                       "session": sessions.get(target, session),
                       "streams": streams, "viewers": viewers,
                       "tokens_per_s": plan.tokens_per_s, "tokens": tokens, "seed": uuid.uuid4().int >> 80,
                       "background": plan.background, "window": window, "warmup": warmup,
                       "pids": {"server": proc.pid, "simulator": sim.pid}, "profile": profile,
                       "loadgen": "tasks" if profile else plan.loadgen, "load_procs": plan.load_procs,
                       "simulator": sim_url, "control": plan.control, "burst": plan.burst, "sample_lag": sample_lag}
                since = time.time()
                result = run_role("load", cfg, base_env, procs, timeout=window + warmup + 160)
                if proc.poll() is not None:
                    raise RuntimeError(f"the {target} server died; see {log_dir}")
                if target in db_urls:
                    result["to_created"] = to_created(db_urls[target], since)
                return result

            # 1. Added latency at light load.
            for target in ("ours", "naive") if "latency" in plan.sections else ():
                r = step(target, plan.latency_streams, plan.latency_window, 2.0)
                results["latency"][target] = r
                print(f"latency {target}: newest p50 {fmt_ms(r['newest']['p50'])} p99 {fmt_ms(r['newest']['p99'])} ms; "
                      f"oldest p50 {fmt_ms(r['oldest']['p50'])} p99 {fmt_ms(r['oldest']['p99'])} ms", flush=True)

            # CPU per relayed delta: the floor, ours (1 and 3 viewers), the baseline, naive, the floor again.
            if "cpu" in plan.sections:
                n = plan.cpu_streams

                def floor() -> None:
                    # the floor on the loop ours runs on too (project.serve runs uvloop)
                    loops = ["asyncio"] + (["uvloop"] if plan.server == "project.serve" or "uvloop" in plan.server
                                           else [])
                    for loop in loops:
                        wait_idle(sim.pid, limit=0.1)
                        cfg = {"simulator": sim_url, "streams": n, "tokens_per_s": plan.tokens_per_s,
                               "tokens": tokens, "seed": uuid.uuid4().int >> 80, "warmup": 3.0,
                               "window": plan.cpu_window, "loop": loop}
                        f = run_role("floor", cfg, base_env, procs, timeout=plan.cpu_window + 160)
                        results["cpu"]["floor"].append(f)
                        print(f"floor {n} streams ({loop}): {f['us_per_event']:.1f} µs/event", flush=True)

                floor()
                targets = ["ours", *(["before"] if plan.baseline else []), *plan.asgi]
                # Rounds alternate the servers, so a busy spell on the shared machine hits them all alike,
                # and which goes first: measured A/A (the same tree as both), the server measured second
                # in a round read 3-8% less (bench/results/relay.md).
                order = [row for r in range(plan.cpu_rounds)
                         for row in [(t, v) for t in (targets if r % 2 == 0 else targets[::-1]) for v in VIEWERS]
                         + [("bare", 1)]] + [("naive", 1)]
                for k, (target, viewers) in enumerate(order):
                    if target not in servers:
                        start_extra(target)
                    r = step(target, n, plan.cpu_window, 3.0, viewers)
                    r.update(label=plan.server if target == "ours" else target, viewers=viewers, ours=target == "ours")
                    results["cpu"]["rows"].append(r)
                    print(f"cpu {target} x{viewers}: {per_delta(r, viewers):.0f} µs/relayed delta, server "
                          f"{r['cpu']['server']:.0%}, rate {r['rate']:.0%}, lag p99 {fmt_ms(r['newest']['p99'])} ms",
                          flush=True)
                    if target not in ("ours", "naive", "bare") and (k + 1 == len(order) or order[k + 1][0] != target):
                        procs.stop(servers.pop(target)[0])
                floor()
                for fmt in (("flamegraph", "raw") if plan.profile else ()):
                    # Not one of the measured rows: py-spy's sampling costs the server a little.
                    out = RESULTS.parent / f"relay_profile.{'svg' if fmt == 'flamegraph' else 'txt'}"
                    step("ours", n, plan.cpu_window, 3.0, 1, profile={"format": fmt, "path": str(out)})
                    print(f"profile: {out.relative_to(ROOT)}", flush=True)

            # 2. Capacity, side by side: each step for ours, then for naive.
            failed = dict.fromkeys(plan.targets, 0)
            for streams in plan.steps if "capacity" in plan.sections else ():
                for target in plan.targets:
                    results["capacity"].setdefault(target, [])
                    if target not in servers:  # "before": the baseline checkout, beside ours step by step
                        start_extra(target)
                    if failed[target] >= 2:  # two steps in a row past the limit: higher ones only get worse
                        results["capacity"][target].append({"streams": streams, "skipped": True})
                        continue
                    r = step(target, streams, plan.window, plan.warmup, sample_lag=True)
                    results["capacity"][target].append(r)
                    ok = r["newest"]["p99"] <= LAG_LIMIT_MS and r["connected"] == streams and r["rate"] > 0.9
                    failed[target] = 0 if ok else failed[target] + 1
                    print(f"{target:5} {streams:4} streams: delivered {r['delivered']:.1%} rate {r['rate']:.1%} "
                          f"lag p50 {fmt_ms(r['newest']['p50'])} p99 {fmt_ms(r['newest']['p99'])} ms, server CPU "
                          f"{r['cpu']['server']:.0%}, sim {r['cpu']['simulator']:.0%}, load {r['cpu']['load']:.0%}"
                          f", ramp {r['ramp_s']:.1f}s{', errors ' + str(r['error_count']) if r['error_count'] else ''}"
                          f"; load avg {r['loadavg']:.1f}, waiting for a CPU: server {r['run_delay']['server']:.0%} "
                          f"sim {r['run_delay']['simulator']:.0%} load {r['run_delay']['load']:.0%}; load loop lag "
                          f"p99 {fmt_ms(r['load_loop_lag_ms']['p99'])} ms, {r['load_us_per_frame']:.0f} µs/frame"
                          + (f"; server loop lag gauge p50 {fmt_ms(r['server_loop_lag_ms']['p50'])} max "
                             f"{fmt_ms(r['server_loop_lag_ms']['max'])} ms" if "server_loop_lag_ms" in r else "")
                          + (f"; created to response.created p50 {r['to_created']['p50']:.2f} p99 "
                             f"{r['to_created']['p99']:.2f} max {r['to_created']['max']:.2f} s"
                             f" ({r['to_created']['never']} never)" if r.get("to_created") else "")
                          + (f"; connect to first view p50 {r['first_view']['p50']:.2f} p99 "
                             f"{r['first_view']['p99']:.2f} max {r['first_view']['max']:.2f} s"
                             f" ({r['first_view']['none']} none)" if r.get("first_view") else "")
                          + (f"; a burst of {r['burst']['sockets']} more connects at once: first view p50 "
                             f"{r['burst']['p50']:.2f} p99 {r['burst']['p99']:.2f} max {r['burst']['max']:.2f} s"
                             f" ({r['burst']['failed']} failed)" if r.get("burst") else ""),
                          flush=True)
            for proc, _ in servers.values():
                procs.stop(proc)

            # 3. Database writes per response, with runners built directly in Django processes: one
            # process per pace, each counting its own statements, at once.
            probe_env = dict(env, DJANGO_SETTINGS_MODULE="project.settings")
            writes: list[dict[str, Any]] = [{} for _ in plan.writes_paces]

            def one(k: int, pace: int) -> None:
                cfg = {"simulator": sim_url, "tokens": plan.writes_tokens, "tokens_per_s": pace,
                       "background": plan.background}
                try:
                    writes[k] = run_role("writes", cfg, probe_env, procs,
                                         timeout=plan.writes_tokens / pace * 3 + 120)
                except Exception as exc:  # reported, not fatal
                    writes[k] = {"error": str(exc), **cfg}

            threads = [threading.Thread(target=one, args=(k, pace)) for k, pace in enumerate(plan.writes_paces)
                       if "writes" in plan.sections]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            results["writes"] = writes if threads else []
            for r in results["writes"]:
                print(f"writes at {r.get('tokens_per_s')} deltas/s: {r.get('writes')} "
                      f"(runner counter {r.get('runner_counter')}, {r.get('checkpoints')} checkpoints)", flush=True)
        finally:
            procs.stop_all()
    results["seconds"] = time.monotonic() - t_start
    return results


# --- report -------------------------------------------------------------------------------------


def environment() -> str:
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


def gc_passes(path: str | None) -> list[tuple[float, int, float]]:
    """(wall-clock start, generation, ms) of our server's slow collections (bench/gcprobe), if logged."""
    if not path or not os.path.exists(path):
        return []
    return [(float(f[0]), int(f[1]), float(f[2])) for f in (line.split() for line in open(path))]


def extra(r: dict[str, Any], gcs: list[tuple[float, int, float]]) -> str:
    """The capacity row's columns on what the lag waited for (rows of older runs have none)."""
    if "loadavg" not in r:
        return " |" * 6
    d = r["run_delay"]
    cells = [f"{r['loadavg']:.1f}", f"{d['server']:.0%} · {d['simulator']:.0%} · {d['load']:.0%}",
             fmt_ms(r["load_loop_lag_ms"]["p99"]), f"{r['load_us_per_frame']:.0f}"]
    c = r.get("control")
    cells.append(f"{fmt_ms(c['p99'])} · {fmt_ms(c['max'])}" if c and c.get("deltas") else "–")
    if gcs and "start_at" in r:
        full = [ms for t, g, ms in gcs if g == 2 and r["start_at"] <= t < r["start_at"] + r["window_s"]]
        cells.append(f"{len(full)} ({max(full):.0f})" if full else "0")
    else:
        cells.append("–")
    return "".join(f" | {c}" for c in cells)


def sustained(r: dict[str, Any]) -> bool:
    return r["newest"]["p99"] <= LAG_LIMIT_MS and r["connected"] == r["streams"] and r["rate"] > 0.9


def max_sustained(rows: list[dict[str, Any]]) -> int:
    """The highest step of an unbroken run of passed steps from the lowest."""
    best = 0
    for r in rows:
        if r.get("skipped") or not sustained(r):
            break
        best = r["streams"]
    return best


def steps_summary(target: str, rows: list[dict[str, Any]]) -> str:
    """Every step a relay passed and failed, each failure with the control streams' p99 (streams
    read straight from the simulator in the same window: late too, the machine was short of CPU)."""
    ran = [r for r in rows if not r.get("skipped")]
    passed = [str(r["streams"]) for r in ran if sustained(r)]
    failed = []
    for r in ran:
        if not sustained(r):
            c = r.get("control")
            control = f" (control p99 {fmt_ms(c['p99'])} ms)" if c and c.get("deltas") else ""
            failed.append(f"{r['streams']}{control}")
    return (f"{target} passed {', '.join(passed) or 'none'}" + (f", failed {', '.join(failed)}" if failed else ""))


def render(res: dict[str, Any], plan: Plan) -> str:
    out: list[str] = []
    sections: list[tuple[bool, int]] = []  # (has data, where it starts): sections not run are left out
    lat = res["latency"]
    sections.append((bool(lat), len(out)))
    out.append(f"### 1. Added latency, light load ({plan.latency_streams} streams x {plan.tokens_per_s} deltas/s, "
               f"{plan.latency_window:.0f} s window)\n")
    out.append("| relay | messages | deltas/message | newest p50 | newest p90 | newest p99 | newest max "
               "| oldest p50 | oldest p99 | oldest max |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for target in ("ours", "naive"):
        r = lat.get(target)
        if not r:
            continue
        out.append(f"| {target} | {r['messages']:,} | {r['deltas'] / max(r['messages'], 1):.2f} "
                   f"| {fmt_ms(r['newest']['p50'])} | {fmt_ms(r['newest']['p90'])} | {fmt_ms(r['newest']['p99'])} "
                   f"| {fmt_ms(r['newest']['max'])} | {fmt_ms(r['oldest']['p50'])} | {fmt_ms(r['oldest']['p99'])} "
                   f"| {fmt_ms(r['oldest']['max'])} |")
    out.append("\nms, receipt - emit. *newest*: the newest delta in each message (for ours, each patch); "
               "*oldest*: its oldest delta.\n")

    sections.append((bool(res["cpu"]["rows"]), len(out)))
    if res["cpu"]["rows"]:
        out.append(render_cpu(res["cpu"], plan.cpu_streams, plan.tokens_per_s, plan.cpu_window))
    sections.append((any(res["capacity"].values()), len(out)))
    out.append(f"### 2. Capacity at {plan.tokens_per_s} deltas/s per stream, one viewer each "
               f"({plan.warmup:.0f} s warm-up after ramp-up, {plan.window:.0f} s measured)\n")
    out.append("| streams | relay | flowing | ramp s | delivered | rate | lag p50 | lag p99 | lag max "
               "| server CPU (loop thread) | simulator CPU | load CPU | load avg | waiting for a CPU: server · sim "
               "· load | load loop lag p99 | load µs/frame | control p99 · max | full GCs (longest ms) | errors |")
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    gcs = {"ours": gc_passes(res.get("gc_log")), "before": gc_passes(res.get("gc_log_before"))}
    for i, streams in enumerate(plan.steps):
        for target in [t for t in ("ours", "before", "naive") if t in res["capacity"]]:
            rows = res["capacity"][target]
            if i >= len(rows):
                continue
            r = rows[i]
            if r.get("skipped"):
                out.append(f"| {streams} | {target} | skipped: failed the two steps before |" + " |" * 16)
                continue
            mark = "" if r["newest"]["p99"] <= LAG_LIMIT_MS else " ✗"
            out.append(f"| {streams} | {target} | {r['connected']} | {r['ramp_s']:.1f} | {r['delivered']:.1%} "
                       f"| {r['rate']:.1%} | {fmt_ms(r['newest']['p50'])} | {fmt_ms(r['newest']['p99'])}{mark} "
                       f"| {fmt_ms(r['newest']['max'])} | {r['cpu']['server']:.0%} ({r['cpu']['server_loop']:.0%}) "
                       f"| {r['cpu']['simulator']:.0%} "
                       f"| {r['cpu']['load']:.0%}{extra(r, gcs.get(target, []))} | {r['error_count']} |")
    ours_max = max_sustained(res["capacity"]["ours"])
    naive_max = max_sustained(res["capacity"]["naive"])
    out.append(f"\nHighest step with p99 lag <= {LAG_LIMIT_MS:.0f} ms (all viewers connected, > 90% of the nominal "
               f"delta rate received): **ours {ours_max}**, **naive {naive_max}**"
               + (f" ({ours_max / naive_max:.1f}x)" if naive_max else "") + ". Every step: "
               + "; ".join(steps_summary(t, res["capacity"][t]) for t in ("ours", "before", "naive")
                           if res["capacity"].get(t)) + ".\n")
    out.append("*delivered*: deltas received / (received + lost), lost counted by revision gaps (ours: a full "
               "outbox drops a patch, the viewer asks for a snapshot) or sequence gaps (naive: `group_send` "
               "drops on a full channel). *rate*: deltas received in the window / (connected streams x "
               f"{plan.tokens_per_s}/s x window). *lag*: receipt - emit of the newest delta of each message. CPU: "
               "share of one core over the window, from /proc/<pid>/stat (all threads; in brackets the main "
               "thread alone, the event loop: the rest is the database thread and other workers). *flowing*: "
               "viewers that received deltas (ramp-up ends when all do).\n")

    sections.append((bool(res["writes"]), len(out)))
    out.append(f"### 3. Database writes per response ({plan.writes_tokens:,}-delta answer)\n")
    out.append("| pace | duration | status | INSERT/UPDATE/DELETE/COPY | runner's own counter | checkpoints "
               "| event batches | vs one write per delta | breakdown |")
    out.append("|---:|---:|---|---:|---:|---:|---:|---:|---|")
    for r in res["writes"]:
        if "error" in r:
            out.append(f"| {r['tokens_per_s']}/s | failed: {r['error'][:80]} | | | | | | | |")
            continue
        ratio = plan.writes_tokens / r["writes"] if r["writes"] else float("inf")
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["by_kind"].items(), key=lambda kv: -kv[1]))
        out.append(f"| {r['tokens_per_s']} deltas/s | {r['seconds']:.1f} s | {r['status']} | {r['writes']} "
                   f"| {r['runner_counter']} "
                   f"| {r['checkpoints']} | {r['event_batches']} | {ratio:.1f}x fewer "
                   f"{'(>= 20x: met)' if ratio >= 20 else '(< 20x: MISSED)'} | {kinds} |")
    out.append("\nCounted by an `execute_wrapper` installed on every database connection of the process running "
               "the runner, and each `COPY` the checkpoint writer sends on PostgreSQL (psycopg runs it outside "
               "Django's wrappers; runs from ee16b8d to 2026-12-04 missed them) (submit's own writes, the "
               "conversation and the request rows, are not included: "
               f"{res['writes'][0].get('submit_writes', '?') if res['writes'] else '?'} statements).\n")
    bounds = [start for _, start in sections[1:]] + [len(out)]
    return "\n".join(line for (kept, start), end in zip(sections, bounds, strict=True) if kept
                     for line in out[start:end])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench relay")
    parser.add_argument("--quick", action="store_true", help="a smoke run; does not write the results file")
    parser.add_argument("--steps", default="", help="comma-separated stream counts")
    parser.add_argument("--window", type=float, default=0)
    parser.add_argument("--sqlite", action="store_true", help="a temp SQLite file instead of PostgreSQL")
    parser.add_argument("--only", default="", help="comma-separated sections: latency,cpu,capacity,writes "
                        "(memory per stream: python -m bench storage --only memory)")
    parser.add_argument("--cpu-streams", type=int, default=0, help="streams in the CPU section (100)")
    parser.add_argument("--asgi", default="", help=f"ASGI servers to measure ours on too: {','.join(ASGI_SERVERS)}")
    parser.add_argument("--targets", default="ours,naive", help="the capacity section's relays")
    parser.add_argument("--cpu-rounds", type=int, default=1, help="rounds of the CPU section's servers, alternated")
    parser.add_argument("--server", default="", help="the ASGI server ours runs on")
    parser.add_argument("--baseline-server", default="", help="the ASGI server the baseline runs on")
    parser.add_argument("--baseline-env", action="append", default=[], metavar="NAME=VALUE",
                        help="set in the baseline's environment: `--baseline . --baseline-env RELAY_COMPILED=false` "
                             "measures this tree interpreted beside it compiled")
    parser.add_argument("--profile", action="store_true", help="py-spy our server under the CPU section's load")
    parser.add_argument("--baseline", default="", help="another checkout whose server the CPU section measures too")
    parser.add_argument("--loadgen", choices=("loop", "tasks"), default="loop",
                        help="load generator: one receive loop per process (default) or the previous task per socket")
    parser.add_argument("--load-procs", type=int, default=2, help="load processes per step (--loadgen loop)")
    parser.add_argument("--gc-log", action="store_true", help="log our server's garbage collections over 5 ms")
    parser.add_argument("--burst", action="store_true",
                        help="after each step's ramp-up, one more socket per stream, opened at once (first view)")
    parser.add_argument("--flush-as-stamped", action="store_true",
                        help="ours with RELAY_FLUSH_MIN_CHARS's default, though the stamps make each delta about "
                             "five times longer (2.2 deltas a patch instead of 4-5), as runs before 2026-12-03")
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        role_main(args.role, json.loads(args.config))
        return 0
    if args.quick:
        plan = Plan(steps=[50, 150], window=4, warmup=2, latency_window=5,
                    writes_paces=(200,))
    else:
        plan = Plan(steps=[50, 100, 150, 200, 250, 300, 400], window=8, warmup=3)
    if args.steps:
        plan.steps = [int(s) for s in args.steps.split(",")]
    if args.window:
        plan.window = args.window
    if args.only:
        plan.sections = tuple(args.only.split(","))
    if args.cpu_streams:
        plan.cpu_streams = args.cpu_streams
    plan.baseline = args.baseline
    plan.baseline_env = dict(pair.split("=", 1) for pair in args.baseline_env)
    plan.burst = args.burst
    plan.profile = args.profile
    plan.flush_as_stamped = args.flush_as_stamped
    plan.loadgen, plan.load_procs, plan.gc_log = args.loadgen, args.load_procs, args.gc_log
    plan.asgi = tuple(a for a in args.asgi.split(",") if a)
    plan.cpu_rounds = args.cpu_rounds
    plan.targets = tuple(args.targets.split(","))
    plan.server = args.server or plan.server
    plan.baseline_server = args.baseline_server or plan.baseline_server
    use_postgres = not args.sqlite and reachable(5432)
    log_dir = Path(tempfile.mkdtemp(prefix="relay-bench-logs-"))
    print(environment(), flush=True)
    res = run(plan, use_postgres, log_dir)
    (log_dir / "results.json").write_text(json.dumps(res, default=str))
    print(f"raw results: {log_dir / 'results.json'}", flush=True)
    table = render(res, plan)
    print()
    print(table)
    if not args.quick and not args.steps and not args.only:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        # The notes under the generated tables (level-2 headings: investigations, side-by-side runs
        # of one section) stay; a run replaces only what it generates.
        notes = ""
        if RESULTS.exists():
            old = RESULTS.read_text()
            at = old.find("\n## ")
            notes = "\n" + old[at + 1:] if at >= 0 else ""
        RESULTS.write_text(HEADER.format(env=environment(), db=res["database"], seconds=res["seconds"],
                                         background=str(plan.background).lower(), flush=flush_note(res))
                           + table + "\n" + notes)
        print(f"\nwrote {RESULTS.relative_to(ROOT)}")
    return 0


def flush_note(res: dict[str, Any]) -> str:
    flush = res.get("flush") or {}
    if flush.get("min_chars", FLUSH_MIN_CHARS) == FLUSH_MIN_CHARS:
        return f"RELAY_FLUSH_MIN_CHARS at its default, {FLUSH_MIN_CHARS}, though the stamps make each delta longer"
    return (f"RELAY_FLUSH_MIN_CHARS={flush['min_chars']}: {FLUSH_MIN_CHARS} scaled by what the stamps add to a "
            f"delta of {flush['plain_chars_per_delta']:.1f} characters, so that patches carry as many deltas as "
            "for the text unstamped (bench/loadgen.py)")


HEADER = """# Relay benchmark

Generated by `python -m bench relay` (bench/relay.py; `python -m bench all` runs the core benchmark
too). Reproduce with exactly that command from the repository root, PostgreSQL on 127.0.0.1:5432
(user postgres, trust auth). This run took {seconds:.0f} s.

Machine: {env}.

Setup, all on loopback, each in its own process: the simulator (`python -m responses_app.simulator`,
`sim-long`, `sim.stamp` puts each delta's emit wall-clock time into its text); our relay as ONE server
process (`python -m project.serve`: uvicorn with httptools, websockets-sansio and uvloop), development
settings, DEBUG off, in-memory channel layer, in-process runner,
default RELAY_* settings (flush interval 50 ms, checkpoints every 500 ms to 2 s (64 events), aiohttp upstream
transport) but {flush}) on {db}; the naive relay (bench/naive_relay.py: a Channels consumer per websocket,
`httpx.AsyncClient()` with its default transport, stdlib `json` per SSE line, one in-memory `group_send` per delta)
as ONE Daphne process; websocket viewers in two load processes per step (bench/loadgen.py: websockets' sans-I/O
protocol on uvloop, one receive loop per process, one window start for both). Requests
go through the JSON API (`POST /api/requests`, session cookie + CSRF header, `background: {background}`),
then the viewer opens `/ws/requests/<id>/`; at the end of a step each viewer sends the explicit Stop
and waits for `terminal`, so no stream outlives its step. The machine has 2 cores for all processes:
simulator, server and load client share them, so the server never has a core to itself at high counts.

"""


if __name__ == "__main__":
    sys.exit(main())

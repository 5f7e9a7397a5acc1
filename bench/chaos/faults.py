"""Carrying out the schedule against a running Cluster, one fault at a time, and the windows in
which each fault was in progress (for attributing a viewer's pause to it).

A fault's window runs from its first action to the moment its effect should be over: a kill -9's
until the lease has run out and a sweep found the stream (plus slack), a restart's until the
process is back and serving (plus a little for clients to reconnect).
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.chaos import schedule as s
from bench.cluster import Cluster

LEASE_S = 12.0  # services.LEASE_SECONDS
SWEEP_S = 3.0
KILL9_TAIL_S = LEASE_S + SWEEP_S + 2.0
RESTART_TAIL_S = 3.0
BLIP_S = 2.0  # how long Redis and PostgreSQL stay down
RESTART_DELAY_S = 2.0  # a kill -9'd worker comes back after this, as systemd's RestartSec would
READY_TIMEOUT_S = 60.0


@dataclass
class Window:
    kind: str
    start: float  # wall clock
    end: float
    detail: str = ""
    steps: list[str] = field(default_factory=list)

    def overlaps(self, a: float, b: float) -> bool:
        return a < self.end and b > self.start


@dataclass
class Injector:
    cluster: Cluster
    t0: float  # wall clock of the load's start
    windows: list[Window] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    async def run(self, faults: list[s.Fault], stop: asyncio.Event) -> None:
        for fault in faults:
            delay = self.t0 + fault.at_s - time.time()
            if delay > 0:
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                    return
                except TimeoutError:
                    pass
            if stop.is_set():
                return
            print(f"[{time.time() - self.t0:7.1f} s] {fault.kind} {fault.target}".rstrip(), flush=True)
            try:
                windows = await asyncio.to_thread(self.rolling if fault.kind == s.ROLLING else self.inject, fault)
            except Exception as exc:  # the run goes on; the report names it
                self.errors.append(f"{fault}: {type(exc).__name__}: {exc}")
                await asyncio.to_thread(self.cluster.ensure_running)
                continue
            for window in windows:
                self.windows.append(window)
                print(f"[{time.time() - self.t0:7.1f} s]   {window.kind} {window.detail}: {'; '.join(window.steps)}",
                      flush=True)

    def rolling(self, fault: s.Fault) -> list[Window]:
        """Every worker, then every web process, one at a time: a window each (its kind says which).
        Each waits for the one before to be serving and its window's tail to pass (as a deploy's
        `minReadySeconds` would), so no pause is counted under two of them."""
        windows: list[Window] = []
        for kind in ("worker", "web"):
            for server in sorted(self.cluster.of_kind(kind), key=lambda x: x.name):
                if windows:
                    time.sleep(max(0.0, windows[-1].end - time.time()))
                window = Window(s.ROLLING_WORKER if kind == "worker" else s.ROLLING_WEB, time.time(), 0.0,
                                server.name)
                (self._restart_worker if kind == "worker" else self._restart_web)(server.name, window)
                window.end = time.time() + RESTART_TAIL_S
                windows.append(window)
        return windows

    def inject(self, fault: s.Fault) -> list[Window]:
        return [self._inject(fault)]

    def _inject(self, fault: s.Fault) -> Window:
        window = Window(fault.kind, time.time(), 0.0, fault.target)
        if fault.kind == s.KILL9:
            self.cluster.kill(fault.target)
            window.steps.append(f"killed {fault.target}")
            time.sleep(RESTART_DELAY_S)
            self._start_worker(fault.target, window)
            window.end = window.start + KILL9_TAIL_S
            return window
        if fault.kind == s.ROLLING:
            raise ValueError("a rolling restart is many windows: rolling()")
        if fault.kind == s.REDIS:
            assert self.cluster.redis is not None
            self.cluster.redis.stop()
            time.sleep(BLIP_S)
            self.cluster.redis.start()
            window.steps.append("redis down and up")
        elif fault.kind == s.POSTGRES:
            assert self.cluster.postgres is not None
            self.cluster.postgres.stop("fast")
            time.sleep(BLIP_S)
            self.cluster.postgres.start()
            window.steps.append("postgresql down and up")
        else:
            raise ValueError(fault.kind)
        window.end = time.time() + RESTART_TAIL_S
        return window

    def _restart_worker(self, name: str, window: Window) -> None:
        started = time.monotonic()
        self.cluster.kill(name, signal.SIGTERM)
        code = self.cluster.servers[name].proc.returncode
        window.steps.append(f"{name} exited {code} in {time.monotonic() - started:.2f} s")
        self._start_worker(name, window)

    def _start_worker(self, name: str, window: Window) -> None:
        log = self.cluster.tmp / f"{name}.log"
        offset = log.stat().st_size if log.exists() else 0
        started = time.monotonic()
        self.cluster.start_worker(name)
        while True:
            with open(log, "rb") as f:
                f.seek(offset)
                if b"relayworker serving the relay-runner channel" in f.read():
                    break
            if not self.cluster.servers[name].alive() or time.monotonic() - started > READY_TIMEOUT_S:
                raise RuntimeError(f"{name} did not start serving:\n{self.cluster.log_tail(name)}")
            time.sleep(0.1)
        window.steps.append(f"{name} serving in {time.monotonic() - started:.1f} s")

    def _restart_web(self, name: str, window: Window) -> None:
        server = self.cluster.servers[name]
        started = time.monotonic()
        self.cluster.kill(name, signal.SIGTERM)
        window.steps.append(f"{name} exited {server.proc.returncode} in {time.monotonic() - started:.2f} s")
        started = time.monotonic()
        self.cluster.start_web(name, port=server.port)
        while not healthy(server.port):
            if time.monotonic() - started > READY_TIMEOUT_S:
                raise RuntimeError(f"{name} not healthy:\n{self.cluster.log_tail(name)}")
            time.sleep(0.1)
        window.steps.append(f"{name} healthy in {time.monotonic() - started:.1f} s")


def healthy(port: Any) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False

"""RSS, CPU and open connections over the run, sampled every few seconds, by role (worker-1 is
worker-1 whatever its PID: a restarted process is a new one), and the durability settings in force."""

from __future__ import annotations

import asyncio
import itertools
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from bench.cluster import Cluster
from bench.harness import cpu_seconds

EVERY_S = 5.0
FLAT = 0.15
LAG_TICK_S = 0.05  # the load's event loop is timed this often: a late tick is a late viewer too
LATE_S = 0.25  # a lag this long is listed with its time


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def sockets(pid: int) -> int:
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    count = 0
    for name in names:
        try:
            count += os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:")
        except OSError:
            pass
    return count


def redis_info(cluster: Cluster) -> tuple[int, float]:
    """(clients connected, RSS in MB) of the private Redis."""
    import redis

    assert cluster.redis is not None
    client = redis.Redis(port=cluster.redis.port, socket_timeout=3)
    try:
        return len(client.client_list()), int(client.info("memory")["used_memory_rss"]) / 2**20
    finally:
        client.close()


def postmaster_pid(cluster: Cluster) -> int | None:
    try:
        assert cluster.postgres is not None
        return int((cluster.postgres.data / "postmaster.pid").read_text().split()[0])
    except (AssertionError, OSError, IndexError, ValueError):
        return None


@dataclass
class Sample:
    t: float  # seconds from the start of the load
    rss: dict[str, float]  # MB by role
    sockets: dict[str, int]
    pg: dict[str, int]  # connections by application_name
    redis_clients: int
    cpu: dict[str, tuple[int, float]] = field(default_factory=dict)  # role: (pid, CPU seconds so far)


@dataclass
class Sampler:
    cluster: Cluster
    t0: float
    samples: list[Sample] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)  # how late each tick of the load's loop was
    late: list[tuple[float, float]] = field(default_factory=list)  # (seconds from the start, lag) >= LATE_S

    def take(self) -> Sample:
        rss, socks, cpu = {}, {}, {}
        times = os.times()
        cpu["load (this process)"] = (os.getpid(), times.user + times.system)
        services = {"redis": self.cluster.redis.proc.pid if self.cluster.redis and self.cluster.redis.proc else None,
                    "postgresql": postmaster_pid(self.cluster)}
        for role, pid in services.items():
            if pid is not None:
                cpu[role] = (pid, cpu_seconds(pid, reaped=True))
        for name, server in list(self.cluster.servers.items()):
            if server.alive():
                cpu[name] = (server.pid, cpu_seconds(server.pid, reaped=True))
                if (mb := rss_mb(server.pid)) is not None:
                    rss[name] = mb
                socks[name] = sockets(server.pid)
        pg: dict[str, int] = {}
        clients = -1
        try:
            assert self.cluster.postgres is not None
            pg = self.cluster.postgres.connections()
        except Exception:
            pass
        try:
            clients, rss["redis"] = redis_info(self.cluster)
        except Exception:
            pass
        return Sample(round(time.time() - self.t0, 1), rss, socks, pg, clients, cpu)

    async def watch_lag(self, stop: asyncio.Event) -> None:
        """The load's own event loop lag: a viewer's pause is timed on this loop, so a busy load
        adds its lag to every pause it measures."""
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            before = loop.time()
            await asyncio.sleep(LAG_TICK_S)
            lag = max(0.0, loop.time() - before - LAG_TICK_S)
            self.lags.append(lag)
            if lag >= LATE_S:
                self.late.append((round(time.time() - self.t0, 1), lag))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.samples.append(await asyncio.to_thread(self.take))
            try:
                await asyncio.wait_for(stop.wait(), EVERY_S)
            except TimeoutError:
                pass

    def cpu_use(self) -> dict[str, dict[str, float]]:
        """Per role, the cores it kept busy: on average over the run, and in its busiest interval
        between two samples (a restarted process starts its count again)."""
        out: dict[str, dict[str, float]] = {}
        for before, after in itertools.pairwise(self.samples):
            span = after.t - before.t
            for role, (pid, seconds) in after.cpu.items():
                earlier = before.cpu.get(role)
                if span <= 0 or earlier is None or earlier[0] != pid:
                    continue
                used = max(0.0, seconds - earlier[1])
                entry = out.setdefault(role, {"seconds": 0.0, "busiest": 0.0})
                entry["seconds"] += used
                entry["busiest"] = max(entry["busiest"], used / span)
        if len(self.samples) > 1 and (wall := self.samples[-1].t - self.samples[0].t) > 0:
            for entry in out.values():
                entry["mean"] = entry["seconds"] / wall
        return out

    def flatness(self, warmup_s: float) -> dict[str, dict[str, Any]]:
        """Per role, after warm-up: the median RSS of the first and of the last quarter of the
        samples, and whether the last is within FLAT of the first."""
        roles = sorted({role for sample in self.samples for role in sample.rss})
        out = {}
        for role in roles:
            values = [x.rss[role] for x in self.samples if x.t >= warmup_s and role in x.rss]
            if len(values) < 4:
                continue
            quarter = max(1, len(values) // 4)
            first, last = statistics.median(values[:quarter]), statistics.median(values[-quarter:])
            growth = last / first - 1
            out[role] = {"first_mb": first, "last_mb": last, "max_mb": max(values), "growth": growth,
                         "flat": growth <= FLAT}
        return out


def durability(cluster: Cluster) -> dict[str, str]:
    import redis

    out: dict[str, str] = {}
    assert cluster.postgres is not None and cluster.redis is not None
    for setting in ("synchronous_commit", "fsync", "full_page_writes", "wal_level"):
        out[f"postgresql {setting}"] = str(cluster.postgres.query(f"SHOW {setting}")[0][0])
    client = redis.Redis(port=cluster.redis.port, socket_timeout=3)
    try:
        for key in ("save", "appendonly", "appendfsync"):
            out[f"redis {key}"] = str(client.config_get(key).get(key, "")) or '""'
    finally:
        client.close()
    return out

"""RSS and open connections over the run, sampled every few seconds, by role (worker-1 is worker-1
whatever its PID: a restarted process is a new one), and the durability settings in force."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from bench.cluster import Cluster

EVERY_S = 5.0
FLAT = 0.15


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


@dataclass
class Sample:
    t: float  # seconds from the start of the load
    rss: dict[str, float]  # MB by role
    sockets: dict[str, int]
    pg: dict[str, int]  # connections by application_name
    redis_clients: int


@dataclass
class Sampler:
    cluster: Cluster
    t0: float
    samples: list[Sample] = field(default_factory=list)

    def take(self) -> Sample:
        rss, socks = {}, {}
        for name, server in list(self.cluster.servers.items()):
            if server.alive():
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
        return Sample(round(time.time() - self.t0, 1), rss, socks, pg, clients)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.samples.append(await asyncio.to_thread(self.take))
            try:
                await asyncio.wait_for(stop.wait(), EVERY_S)
            except TimeoutError:
                pass

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

"""Several processes, one PROMETHEUS_MULTIPROC_DIR: a Daphne server's /metrics adds up what real
subprocesses counted (workers that exited, one still running), and a process that exits leaves
the live gauges."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.host.test_security_production import ROOT, serve
from tests.metrics_helpers import parse, value
from tests.servers import stop

COUNT = """
import django
django.setup()
from responses_app.ops import metrics
for _ in range({n}):
    metrics.request_ended(status="completed", model="sim-text", duration_s=1.5)
metrics.CANCELS.inc({n})
metrics.STREAMS_IN_FLIGHT.inc()  # left up: this process exits, so it drops out of the live sum
"""

HOLD = """
import sys
import django
django.setup()
from responses_app.ops import metrics
metrics.request_ended(status="failed", model="sim-text", duration_s=0.5)
metrics.STREAMS_IN_FLIGHT.inc(2)
metrics.VIEWERS.inc(3)
print("ready", flush=True)
sys.stdin.readline()
"""


def environment(directory: Path) -> dict[str, str]:
    return {**os.environ, "DJANGO_ENV": "development", "DJANGO_SETTINGS_MODULE": "project.settings",
            "PROMETHEUS_MULTIPROC_DIR": str(directory)}


def test_processes_counters_and_gauges_are_aggregated(tmp_path: Path) -> None:
    directory = tmp_path / "prometheus"
    directory.mkdir()
    env = environment(directory)
    for n in (2, 3):  # two runner processes that counted and exited
        subprocess.run([sys.executable, "-c", COUNT.format(n=n)], cwd=ROOT, env=env, check=True, timeout=60)
    holder = subprocess.Popen([sys.executable, "-c", HOLD], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    server = None
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        server, url = serve(env, tmp_path / "daphne.log", ready_path="/metrics")
        samples = parse(httpx.get(url + "/metrics", timeout=10).text)
        assert value(samples, "relay_requests_total", status="completed", model="sim-text") == 5
        assert value(samples, "relay_requests_total", status="failed", model="sim-text") == 1
        assert value(samples, "relay_request_duration_seconds_count") == 6
        assert value(samples, "relay_request_duration_seconds_sum") == 5 * 1.5 + 0.5
        assert value(samples, "relay_cancels_total") == 5
        assert value(samples, "relay_streams_in_flight") == 2, "only the live processes' gauges"
        assert value(samples, "relay_viewers") == 3

        holder.communicate("\n", timeout=30)  # it exits: out of the live gauges, its counts stay
        samples = parse(httpx.get(url + "/metrics", timeout=10).text)
        assert value(samples, "relay_streams_in_flight") == 0 and value(samples, "relay_viewers") == 0
        assert value(samples, "relay_requests_total", status="failed", model="sim-text") == 1

        killed = subprocess.Popen([sys.executable, "-c", HOLD], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert killed.stdout is not None and killed.stdout.readline().strip() == "ready"
        assert value(parse(httpx.get(url + "/metrics", timeout=10).text), "relay_viewers") == 3
        killed.kill()  # no atexit: its files stay, and the next scrape finds its pid gone
        killed.wait()
        samples = parse(httpx.get(url + "/metrics", timeout=10).text)
        assert value(samples, "relay_viewers") == 0 and value(samples, "relay_streams_in_flight") == 0
        assert value(samples, "relay_requests_total", status="failed", model="sim-text") == 2
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if server is not None:
            stop(server)  # type: ignore[arg-type]


def test_a_missing_directory_is_refused_at_start_up(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT,
                            env=environment(tmp_path / "absent"), capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "PROMETHEUS_MULTIPROC_DIR must be a writable directory" in result.stderr

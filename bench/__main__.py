"""`python -m bench <name> [options]`, one benchmark per module of this package:

    python -m bench [--quick]          the streaming core (bench/core.py)
    python -m bench relay [--quick]    the relay: latency, capacity, CPU beside a naive relay (bench/relay.py)
    python -m bench scaled             N streams x M viewers, one process and scaled out (bench/scaled.py)
    python -m bench wire [--quick]     websocket bytes per answer and latency, before and after (bench/wire.py)
    python -m bench transport          httpx's default transport vs httpx-aiohttp (bench/transport.py)
    python -m bench metrics            what the live metrics cost the hot path, before and after (bench/metrics.py)
    python -m bench storage [--quick]  checkpoint and event-log bytes per answer, memory per stream (bench/storage.py)
    python -m bench safety [--quick]   the latency buffered mode adds, the CPU each safety mode costs (bench/safety.py)
    python -m bench render [--quick]   the chat page's render cost per frame in Chromium (bench/render.py)
    python -m bench writer             one checkpoint round on PostgreSQL, COPY against INSERT (bench/writer.py)
    python -m bench tool_rounds        a 10-round tool conversation over SSE and WebSocket mode (bench/tool_rounds.py)
    python -m bench all                core, transport and relay
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = ("core", "relay", "scaled", "transport", "metrics", "safety", "render", "storage", "wire", "writer",
              "tool_rounds")


def _run(name: str, argv: list[str]) -> int:
    result = importlib.import_module(f"bench.{name}").main(argv)
    return int(result or 0)


def run(argv: list[str]) -> int:
    if argv[:1] == ["all"]:
        return _run("transport", []) or _run("core", argv[1:]) or _run("relay", argv[1:])
    if argv[:1] and argv[0] in BENCHMARKS:
        return _run(argv[0], argv[1:])
    if argv[:1] and not argv[0].startswith("-"):
        print(f"no benchmark {argv[0]!r}; one of: {', '.join(BENCHMARKS)}, all", file=sys.stderr)
        return 2
    return _run("core", argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))

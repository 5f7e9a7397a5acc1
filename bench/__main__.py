"""`python -m bench [--quick]`: the streaming core benchmark (bench/core.py).
`python -m bench relay [--quick]`: the relay benchmark (bench/relay.py).
`python -m bench scaled [--streams 20,50]`: N streams x M viewers, one process and scaled out (bench/scaled.py).
`python -m bench wire [--quick]`: websocket bytes per answer and latency, before and after (bench/wire.py).
`python -m bench transport`: httpx's default transport vs httpx-aiohttp (bench/transport.py).
`python -m bench all`: core, transport and relay."""

from __future__ import annotations

import sys


def run(argv: list[str]) -> int:
    if argv[:1] == ["relay"]:
        from bench.relay import main as relay

        return relay(argv[1:])
    if argv[:1] == ["scaled"]:
        from bench.scaled import main as scaled

        return scaled(argv[1:])
    if argv[:1] == ["wire"]:
        from bench.wire import main as wire

        return wire(argv[1:])
    if argv[:1] == ["transport"]:
        from bench.transport import main as transport

        transport(argv[1:])
        return 0
    if argv[:1] == ["all"]:
        from bench.core import main as core
        from bench.relay import main as relay
        from bench.transport import main as transport

        transport([])
        return core(argv[1:]) or relay(argv[1:])
    from bench.core import main as core

    return core(argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))

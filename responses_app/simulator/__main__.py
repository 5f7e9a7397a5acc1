"""Serve the simulator on its own: `python -m responses_app.simulator --host 127.0.0.1 --port 8001`.

Port 0 picks a free port; the chosen base URL is printed as `SIMULATOR_LISTENING <url>`.
"""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m responses_app.simulator")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--verbosity", type=int, default=0)
    args = parser.parse_args(argv)

    # daphne.server installs the asyncio reactor on import: it must come before twisted's reactor.
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server
    from twisted.internet import reactor

    from .app import create_app

    logging.basicConfig(level=logging.WARNING)

    def announce() -> None:
        for _host, port in server.listening_addresses:
            print(f"SIMULATOR_LISTENING http://{args.host}:{port}/v1", flush=True)
            return
        reactor.callLater(0.01, announce)  # type: ignore[arg-type]  # twisted stubs are wrong

    def ready() -> None:
        reactor.callWhenRunning(announce)

    server = Server(
        application=create_app(),
        endpoints=build_endpoint_description_strings(host=args.host, port=args.port),
        verbosity=args.verbosity,
        ready_callable=ready,
    )
    server.run()
    sys.exit(0)


if __name__ == "__main__":
    main()

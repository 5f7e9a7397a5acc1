"""Serve the simulator on its own: `python -m responses_app.simulator --host 127.0.0.1 --port 8001`.

Port 0 picks a free port; the chosen base URL is printed as `SIMULATOR_LISTENING <url>` once the
server accepts connections. It runs on uvicorn with the httptools parser: its per-write overhead is
well below Daphne's (Twisted), which matters for paced streams (README.md, Cost). `--server daphne`
keeps the Daphne path for comparison.

WebSocket mode (`ws://…/v1/responses`, wsmode.py) is served by uvicorn's sans-I/O `websockets`
protocol; `--ws-max-age-s` shortens its connection limit (the API's 60 minutes) for tests.

Every request must bear `Authorization: Bearer <key>`: `--api-key`, else $SIMULATOR_API_KEY, else
the development default (`sim-dev-key`, what the relay sends in development).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from types import FrameType

from .auth import DEV_API_KEY
from .wsmode import WS_MAX_AGE_S


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/v1" if ":" in host else f"http://{host}:{port}/v1"


def _announce(host: str, port: int) -> None:
    print(f"SIMULATOR_LISTENING {_url(host, port)}", flush=True)


class _CutStreamsFilter(logging.Filter):
    """Drops uvicorn's traceback for a stream cancelled at shutdown: cutting it is the intent."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, asyncio.CancelledError)


def run_uvicorn(host: str, port: int, verbosity: int, api_key: str, ws_max_age_s: float,
                stateless: bool = False) -> None:
    import uvicorn

    from .app import create_app

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            # SIGINT/SIGTERM: shut down, cutting open streams after timeout_graceful_shutdown; a
            # second signal skips the wait. Unlike uvicorn's own handler this does not re-raise
            # the signal once shut down, so the exit status is 0, as it was under Daphne.
            if self.should_exit:
                self.force_exit = True
            self.should_exit = True

    config = uvicorn.Config(
        create_app(api_key=api_key, ws_max_age_s=ws_max_age_s, stateless=stateless),
        host=host,
        port=port,
        http="httptools",
        ws="websockets-sansio",
        ws_per_message_deflate=False,  # events are small and many: compressing each costs more than it saves
        lifespan="on",
        log_level="warning" if verbosity <= 0 else "info" if verbosity == 1 else "debug",
        access_log=verbosity >= 2,
        proxy_headers=False,
        server_header=False,
        date_header=False,
        # Longer than clients keep idle connections (httpx: 5 s, the same as uvicorn's default), so
        # the client always closes an idle one first and never sends on a connection being closed.
        timeout_keep_alive=60,
        timeout_graceful_shutdown=1,
    )
    server = Server(config)
    # uvicorn.Config has configured uvicorn's loggers by now: the filter is not overwritten.
    logging.getLogger("uvicorn.error").addFilter(_CutStreamsFilter())

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.01)
        _announce(host, server.servers[0].sockets[0].getsockname()[1])

    async def serve() -> None:
        announcing = asyncio.ensure_future(announce())
        try:
            await server.serve()  # a failed startup (port taken) exits with status 3
        finally:
            announcing.cancel()

    asyncio.run(serve())


def run_daphne(host: str, port: int, verbosity: int, api_key: str) -> None:
    # daphne.server installs the asyncio reactor on import: it must come before twisted's reactor.
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server
    from twisted.internet import reactor

    from .app import create_app

    logging.basicConfig(level=logging.WARNING)

    def announce() -> None:
        for _host, bound in server.listening_addresses:
            _announce(host, bound)
            return
        reactor.callLater(0.01, announce)  # type: ignore[arg-type]  # twisted stubs are wrong

    def ready() -> None:
        reactor.callWhenRunning(announce)

    server = Server(
        application=create_app(api_key=api_key),
        endpoints=build_endpoint_description_strings(host=host, port=port),
        verbosity=verbosity,
        ready_callable=ready,
    )
    server.run()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m responses_app.simulator")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--verbosity", type=int, default=0)
    parser.add_argument(
        "--server",
        choices=["uvicorn", "daphne"],
        default="uvicorn",
        help="ASGI server: uvicorn (default) or daphne, which costs more CPU per streamed event",
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get("SIMULATOR_API_KEY") or DEV_API_KEY,
        help="the bearer key every request must carry (default: $SIMULATOR_API_KEY or the dev key)",
    )
    parser.add_argument(
        "--ws-max-age-s",
        type=float,
        default=WS_MAX_AGE_S,
        help="WebSocket mode: how long one connection may live (default: the API's 3600)",
    )
    parser.add_argument(
        "--stateless",
        action="store_true",
        help="keep no responses reachable: retrieve, cancel and delete answer 404 (as Ollama's server)",
    )
    args = parser.parse_args(argv)
    if args.server == "daphne":
        run_daphne(args.host, args.port, args.verbosity, args.api_key)
    else:
        run_uvicorn(args.host, args.port, args.verbosity, args.api_key, args.ws_max_age_s, args.stateless)
    sys.exit(0)


if __name__ == "__main__":
    main()

"""Serve the relay: `python -m project.serve [--host H] [--port P] [--proxy-headers] [--reload]`.

uvicorn with the httptools HTTP parser, the sans-I/O `websockets` protocol and uvloop, running
the same Channels application (project.asgi). Chosen over Daphne and over uvicorn on asyncio's
own loop: the least CPU per relayed delta of the three (bench/README.md, relay). Under Daphne,
Twisted's reactor over asyncio adds an epoll registration pair per socket write, and autobahn
formats a log line per frame whether it is logged or not.

The application is imported before the server starts, so a bad configuration (settings refused
under production) fails here, with its ImproperlyConfigured, and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

WS_PING_INTERVAL_S = 20.0  # proxies cut a silent websocket after about a minute
WS_PING_TIMEOUT_S = 30.0
GRACEFUL_SHUTDOWN_S = 10  # open websockets get this long to close on SIGTERM
# What --reload watches: the project's own code, not the virtualenv beside it (polling every .py
# file of .venv kept a core busy).
RELOAD_DIRS = [str(Path(__file__).resolve().parent.parent / name) for name in ("project", "responses_app")]


# Full collections: at most one per this many second-generation ones (CPython's default is 10).
GC_FULL_AFTER = 100


def tune_gc() -> None:
    """Fewer, smaller full garbage collections in the serving process.

    A full collection scans every tracked object while the event loop waits, and under load every
    stream's lag rose together with each one (bench/README.md, relay). The objects allocated at
    startup (Django, settings, every module) live as long as the process, so they are frozen out
    of every scan; and a full pass waits for GC_FULL_AFTER second-generation passes instead of
    CPython's default (which still also waits for the long-lived objects to grow by a quarter).
    What it costs: garbage in reference cycles that survived two passes lingers longer (a relay's
    cycles are few: tracebacks of cancelled tasks)."""
    import gc

    gc.collect()
    gc.freeze()
    first, second, _ = gc.get_threshold()
    gc.set_threshold(first, second, GC_FULL_AFTER)


def ws_max_bytes(max_frame_chars: int) -> int:
    """The server's own limit on a client's websocket message, in bytes: the app's limit in
    characters (consumers/guard.py, MAX_FRAME_CHARS) at UTF-8's four bytes each, so every frame
    the app would read passes and a bigger one is refused (1009) from its header, its payload
    never read (uvicorn's default reads up to 16 MiB before the app's check could apply)."""
    return 4 * max_frame_chars


class ClientFrameFilter(logging.Filter):
    """uvicorn logs a client's text frame that is not UTF-8 with a traceback, then closes the socket
    with 1007: the client's fault, worth one warning line, as every other bad frame gets none."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], UnicodeDecodeError):
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.serve")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--proxy-headers", action="store_true",
                        help="trust X-Forwarded-Proto/-For from FORWARDED_ALLOW_IPS (default 127.0.0.1): "
                             "behind the TLS-terminating proxy")
    parser.add_argument("--reload", action="store_true", help="restart on code changes (development)")
    parser.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)

    import uvicorn

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    if args.reload:
        import django

        django.setup()  # for the frame limit below; each reloaded worker imports the app itself
        app: object = "project.asgi:application"
    else:
        from project.asgi import application

        app = application
        tune_gc()
    from responses_app.consumers.guard import MAX_FRAME_CHARS
    logging.getLogger("uvicorn.error").addFilter(ClientFrameFilter())  # kept when uvicorn configures logging
    uvicorn.run(
        app,  # type: ignore[arg-type]
        host=args.host,
        port=args.port,
        http="httptools",
        ws="websockets-sansio",
        loop="uvloop",
        lifespan="off",  # Channels' ProtocolTypeRouter has no lifespan handler
        ws_ping_interval=WS_PING_INTERVAL_S,
        ws_ping_timeout=WS_PING_TIMEOUT_S,
        # Daphne never negotiated it either: compressing every small patch frame costs CPU per
        # frame per viewer for a few bytes saved.
        ws_per_message_deflate=False,
        ws_max_size=ws_max_bytes(MAX_FRAME_CHARS),
        proxy_headers=args.proxy_headers,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        access_log=args.access_log,
        reload=args.reload,
        reload_dirs=RELOAD_DIRS if args.reload else None,
    )


if __name__ == "__main__":
    main()

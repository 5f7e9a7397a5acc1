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
import socket
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uvicorn

WS_PING_INTERVAL_S = 20.0  # proxies cut a silent websocket after about a minute
WS_PING_TIMEOUT_S = 30.0
GRACEFUL_SHUTDOWN_S = 10  # on SIGTERM, the longest a request task gets to end before it is cancelled
STREAMS_CUT_AFTER_S = 1.0  # ... and a connection still open (a streaming response) before it is cut
# On SIGTERM the websockets close (1012) this many a second, not all at once: their tabs reconnect to
# the other web processes as those can take them (a process takes 80-100 a second on two cores:
# bench/README.md, herd), while the rest are still served here, so none waits behind a herd.
DRAIN_PER_S = 50
DRAIN_MAX_S = 4.0  # ... and at most this long: past it, the rest close at once
DRAIN_TICK_S = 0.05
# Before that, each socket's client is asked to move (viewers/guard.py `move_sockets`), as fast and
# within as long: it opens a new socket elsewhere and closes this one once the new one speaks. What
# has not moved MOVE_WAIT_S after the last ask is closed as above.
MOVE_WAIT_S = 5.0
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
    characters (viewers/guard.py, MAX_FRAME_CHARS) at UTF-8's four bytes each, so every frame
    the app would read passes and a bigger one is refused (1009) from its header, its payload
    never read (uvicorn's much larger default would read it whole before the app's check applied)."""
    return 4 * max_frame_chars


class ClientFrameFilter(logging.Filter):
    """uvicorn logs a client's text frame that is not UTF-8 with a traceback, then closes the socket
    with 1007: the client's fault, worth one warning line, as every other bad frame gets none."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], UnicodeDecodeError):
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def stopping_server(config: uvicorn.Config) -> uvicorn.Server:
    """uvicorn's Server with a shutdown for a rolling deploy. On SIGTERM uvicorn closes every
    websocket with 1012 at once, but waits for every HTTP connection whose response is still
    streaming, and such a response ends only when its stream does: the embedded simulator's stream
    to this process's own runner, an SSE endpoint's. So the process lived out its whole grace
    (GRACEFUL_SHUTDOWN_S) while its runners kept streaming. Here the runners served in this process
    hand their streams over first (relay/worker.py `stop_serving`), then connections still open
    after STREAMS_CUT_AFTER_S are cut: the application hears `http.disconnect`, its streaming
    responses end, and their clients reconnect to a live process.

    Before that, it stops listening, asks its websockets' clients to move to another process
    (`move_sockets`), and closes those still open a few at a time (`drain`)."""
    import asyncio

    import uvicorn

    class StoppingServer(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            from responses_app.relay.worker import stop_serving
            from responses_app.viewers.guard import move_sockets

            try:
                await stop_serving()
            except Exception:  # the leases run out instead, as after a crash
                logging.getLogger("responses_app.relay.worker").exception("handing the streams over failed")
            for server in self.servers:  # no new connection: a tab moved off must not come back here
                server.close()
            for sock in sockets or []:
                sock.close()
            try:
                await move_sockets(per_s=DRAIN_PER_S, spread_s=DRAIN_MAX_S, wait_s=MOVE_WAIT_S)
            except Exception:  # they are closed below all the same
                logging.getLogger("uvicorn.error").exception("asking the sockets to move failed")
            await self.drain()
            cut = asyncio.get_running_loop().call_later(STREAMS_CUT_AFTER_S, self.cut_connections)
            try:
                await super().shutdown(sockets)
            finally:
                cut.cancel()

        async def drain(self) -> None:
            """Close the websockets (1012, what uvicorn's shutdown sends) DRAIN_PER_S a second, over
            at most DRAIN_MAX_S."""
            websockets = [c for c in list(self.server_state.connections)
                          if type(c).__module__.startswith("uvicorn.protocols.websockets")]
            if not websockets:
                return
            loop = asyncio.get_running_loop()
            started = loop.time()
            rate = max(DRAIN_PER_S, len(websockets) / DRAIN_MAX_S)
            closed = 0
            while closed < len(websockets):
                due = min(len(websockets), 1 + int((loop.time() - started) * rate))
                for connection in websockets[closed:due]:
                    if connection in self.server_state.connections:  # not closed by its client meanwhile
                        connection.shutdown()
                closed = due
                if closed < len(websockets):
                    await asyncio.sleep(DRAIN_TICK_S)
            # Gone before uvicorn's own shutdown, which would close each again (websockets refuses a
            # second close): a transport still flushing to a slow client after a tick is cut.
            cut_at, aborted = loop.time() + DRAIN_TICK_S, False
            while any(c in self.server_state.connections for c in websockets) and loop.time() < cut_at + 1:
                if not aborted and loop.time() >= cut_at:
                    aborted = True
                    for connection in websockets:
                        if connection in self.server_state.connections:
                            connection.transport.abort()
                await asyncio.sleep(0.005)
            logging.getLogger("uvicorn.error").info("closed %d websockets in %.2f s", closed, loop.time() - started)

        def cut_connections(self) -> None:
            for connection in list(self.server_state.connections):
                transport = getattr(connection, "transport", None)
                if transport is not None and not transport.is_closing():
                    transport.abort()

    return StoppingServer(config)


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
    from responses_app.viewers.guard import MAX_FRAME_CHARS
    logging.getLogger("uvicorn.error").addFilter(ClientFrameFilter())  # kept when uvicorn configures logging
    options: dict[str, object] = dict(
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
    )
    if args.reload:  # the reloading supervisor's children stop as uvicorn's own do
        uvicorn.run(app, reload=True, reload_dirs=RELOAD_DIRS, **options)  # type: ignore[arg-type]
    else:
        stopping_server(uvicorn.Config(app, **options)).run()  # type: ignore[arg-type]


if __name__ == "__main__":
    main()

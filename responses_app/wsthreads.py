"""Websockets off asgiref's one thread-sensitive thread.

Channels runs every websocket consumer's `database_sync_to_async` calls, its AuthMiddleware's
session and user lookup, and the `aclose_old_connections()` its dispatch awaits before every
handler, on that one thread per process. In a burst of connects each connect's half dozen calls
queued behind every other's, and a viewer waited seconds for its first view (bench/README.md,
relay). Here the auth lookup and the consumers' calls run on the websocket pool
(`dbthreads.ws_call`: on PostgreSQL RELAY_WS_DB_THREADS threads, each call closing stale
connections before and after as Channels' wrapper does; on SQLite the one shared thread, as
before), and the consumers dispatch without the per-message hop, which only closed that thread's
stale connections: every database call of theirs closes its own thread's around it.
"""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddleware, get_user
from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.sessions import CookieMiddleware, SessionMiddleware

from .relay.dbthreads import ws_call


class PooledAuthMiddleware(AuthMiddleware):
    """Channels' AuthMiddleware, its lookup unchanged (Channels' own `get_user`: the session's user
    and backend, the session hash verified, the session flushed on a mismatch), on the pool."""

    async def resolve_scope(self, scope: dict[str, Any]) -> None:
        scope["user"]._wrapped = await ws_call(get_user.func)(scope)


def AuthMiddlewareStack(inner: Any) -> Any:  # noqa: N802 - Channels' name, the same stack
    return CookieMiddleware(SessionMiddleware(PooledAuthMiddleware(inner)))


class DirectDispatch:
    """Channels' dispatch without its `aclose_old_connections()` hop on the shared thread, for a
    consumer that makes no database call on that thread (the runner consumer: runners have threads
    of their own; the websocket consumers below: every call through `ws_call`)."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)


class PooledConsumerMixin(DirectDispatch):
    """For a websocket consumer whose every database call goes through `ws_call`: Channels'
    dispatch and disconnect without their `aclose_old_connections()` hop on the shared thread."""

    groups: list[str]
    channel_layer: Any
    channel_name: str

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        for group in self.groups or ():
            await self.channel_layer.group_discard(group, self.channel_name)
        await self.disconnect(message["code"])  # type: ignore[attr-defined]
        raise StopConsumer()

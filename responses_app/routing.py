"""The app's websocket routes, and who may open a socket.

Mount the routes where the app's URLs are included, beside the host's own:

    URLRouter([path("assistant/", URLRouter(responses_app.routing.websocket_urlpatterns)), ...])

They match only their own paths: a host's routes before or after them are untouched. (Set
RELAY_WEBSOCKET_PREFIX when the sockets are mounted elsewhere than the pages.)

`ExactOriginValidator` admits a handshake only when its Host is allowed (ALLOWED_HOSTS) and its
Origin is exactly this site (scheme, host and port; the scheme from the connection or, when
SECURE_PROXY_SSL_HEADER names a header, from the proxy's) or one of CSRF_TRUSTED_ORIGINS.
`NotFoundConsumer` is for a host's own catch-all, last in its router: it closes 4404.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.urls import path

from .viewers.conversation import ConversationConsumer
from .viewers.request import RequestConsumer

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def normalize_origin(value: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) with the default port filled in; None for anything not an origin."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/") or parts.query:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def allowed_hosts() -> list[str]:
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:  # Django's own rule for DEBUG with no ALLOWED_HOSTS
        hosts = [".localhost", "127.0.0.1", "[::1]"]
    return hosts


def host_allowed(host: str | None) -> bool:
    if not host:
        return False
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed_hosts())


def handshake_scheme(scope: dict[str, Any]) -> str:
    """https or http: as Django's `request.is_secure()` decides it, SECURE_PROXY_SSL_HEADER included."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, secure = proxy
        header = name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
        forwarded = _header(scope, header)
        if forwarded is not None:
            return "https" if forwarded.split(",")[0].strip() == secure else "http"
    return "https" if scope.get("scheme") in ("wss", "https") else "http"


def origin_allowed(scope: dict[str, Any]) -> bool:
    host = _header(scope, b"host")
    origin = _header(scope, b"origin")
    if not host_allowed(host) or origin is None:
        return False
    got = normalize_origin(origin)
    if got is None:
        return False
    own = normalize_origin(f"{handshake_scheme(scope)}://{host}")
    trusted = {normalize_origin(o) for o in settings.CSRF_TRUSTED_ORIGINS}
    return got == own or got in trusted


class ExactOriginValidator:
    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier.as_asgi()(scope, receive, send)


class NotFoundConsumer(AsyncWebsocketConsumer):
    """Accept, then close 4404: a client can tell a wrong address from a network failure."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=4404)


websocket_urlpatterns = [
    path("ws/requests/<uuid:request_id>/", RequestConsumer.as_asgi(), name="ws-request"),
    path("ws/conversations/<uuid:conversation_id>/", ConversationConsumer.as_asgi(), name="ws-conversation"),
    # the same, for a share link's viewers (selectors.share_open): read only, closed when it is revoked
    path("ws/shares/<str:share>/requests/<uuid:request_id>/", RequestConsumer.as_asgi(), name="ws-share-request"),
    path("ws/shares/<str:share>/conversations/<uuid:conversation_id>/", ConversationConsumer.as_asgi(),
         name="ws-share-conversation"),
]

"""ASGI entry point: HTTP through Django, websockets through Channels.

The embedded simulator (development only) answers /simulator/v1/* only for an allowed Host
(ALLOWED_HOSTS, as Django checks it) and a request bearing RELAY_SIMULATOR_API_KEY. Websockets
pass the exact origin check of responses_app.routing before authentication and routing.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
from project.handler import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()  # first: sets up apps before anything imports models

from django.conf import settings  # noqa: E402

from responses_app.checks import refuse_errors  # noqa: E402

# uvicorn and Daphne run no system checks: a setting that cannot work stops the server here, and
# outside development so does an unsafe deployment (the checks of `manage.py check --deploy`).
refuse_errors(deploy=settings.PRODUCTION)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from responses_app.relay.runner_channel import runner_application  # noqa: E402
from responses_app.routing import (  # noqa: E402
    ExactOriginValidator,
    NotFoundConsumer,
    host_allowed,
    websocket_urlpatterns,
)
from responses_app.wsthreads import AuthMiddlewareStack  # noqa: E402 - Channels' stack, on the websocket pool

SIMULATOR_PREFIX = "/simulator/v1"
_BAD_HOST = (b'{"error":{"message":"Invalid Host header.","type":"invalid_request_error",'
             b'"param":null,"code":"invalid_host"}}')


def _host(scope):  # type: ignore[no-untyped-def]
    for name, value in scope.get("headers") or []:
        if name == b"host":
            return bytes(value).decode("latin-1")
    return None


def _http_app():  # type: ignore[no-untyped-def]
    """Django for everything, except /simulator/v1/* which goes to the pure-ASGI simulator."""
    if not settings.SIMULATOR_ENABLED:
        return django_asgi_app
    from responses_app.upstream.embedded import simulator_app

    simulator = simulator_app()  # the same instance the relay reaches in-process

    async def http(scope, receive, send):  # type: ignore[no-untyped-def]
        path = scope["path"]
        if path.startswith(SIMULATOR_PREFIX + "/") or path == SIMULATOR_PREFIX:
            if not host_allowed(_host(scope)):
                await send({"type": "http.response.start", "status": 400,
                            "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": _BAD_HOST})
                return None
            inner = dict(scope, path=path[len("/simulator") :],
                         root_path=scope.get("root_path", "") + "/simulator")
            return await simulator(inner, receive, send)
        return await django_asgi_app(scope, receive, send)

    return http


application = ProtocolTypeRouter(
    {
        "http": _http_app(),
        # The app's sockets where its pages are (the site root), then a 4404 for any other path.
        "websocket": ExactOriginValidator(AuthMiddlewareStack(URLRouter([
            *websocket_urlpatterns,
            re_path(r"", NotFoundConsumer.as_asgi()),
        ]))),
        # `manage.py runworker relay-runner` serves this when runners are scaled out
        "channel": runner_application,
    }
)

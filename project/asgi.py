"""ASGI entry point: HTTP through Django, websockets through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_asgi_app = get_asgi_application()  # first: sets up apps before anything imports models

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from responses_app.relay.worker import runner_application  # noqa: E402
from responses_app.routing import websocket_urlpatterns  # noqa: E402

SIMULATOR_PREFIX = "/simulator/v1"


def _http_app():  # type: ignore[no-untyped-def]
    """Django for everything, except /simulator/v1/* which goes to the pure-ASGI simulator."""
    if not settings.SIMULATOR_ENABLED:
        return django_asgi_app
    from responses_app.embedded import simulator_app

    simulator = simulator_app()  # the same instance the relay reaches in-process

    async def http(scope, receive, send):  # type: ignore[no-untyped-def]
        path = scope["path"]
        if path.startswith(SIMULATOR_PREFIX + "/") or path == SIMULATOR_PREFIX:
            inner = dict(scope, path=path[len("/simulator") :],
                         root_path=scope.get("root_path", "") + "/simulator")
            return await simulator(inner, receive, send)
        return await django_asgi_app(scope, receive, send)

    return http


application = ProtocolTypeRouter(
    {
        "http": _http_app(),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        # `manage.py runworker relay-runner` serves this when runners are scaled out
        "channel": runner_application,
    }
)

"""The addresses of the app, wherever a host mounted it: its URLs reversed, its websocket routes
under RELAY_WEBSOCKET_PREFIX (by default where the pages are). The pages hand them to the script
(`{% relay_assets %}`); the JSON API names its sockets with them."""

from __future__ import annotations

import re

from django.urls import reverse

from .conf import app_settings

_REQUEST = "00000000-0000-4000-8000-00000000a001"
_CONVERSATION = "00000000-0000-4000-8000-00000000c002"
_APPROVAL = "relay-approval-placeholder"
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")
_NAMES = {"request_id": "request", "conversation_id": "conversation", "approval_request_id": "approval"}


def _reverse(name: str, **kwargs: str) -> str:
    url = reverse(f"responses_app:{name}", kwargs=kwargs)
    return url.replace(_REQUEST, "{request}").replace(_CONVERSATION, "{conversation}").replace(_APPROVAL, "{approval}")


def websocket_prefix() -> str:
    """Where the websocket routes are mounted: RELAY_WEBSOCKET_PREFIX, else where the pages are."""
    prefix = app_settings.WEBSOCKET_PREFIX
    if prefix is None:
        prefix = reverse("responses_app:conversations")
    return "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"


def socket_path(name: str) -> str:
    from .routing import websocket_urlpatterns

    for pattern in websocket_urlpatterns:
        if pattern.name == name:
            route = _CONVERTER.sub(lambda m: "{" + _NAMES.get(m.group(1), m.group(1)) + "}", str(pattern.pattern))
            return websocket_prefix() + route
    raise LookupError(name)


def url_templates() -> dict[str, str]:
    """The addresses the script uses, with `{request}`, `{conversation}` and `{approval}` to fill in."""
    return {
        "conversations": _reverse("conversations"),
        "chat": _reverse("chat", conversation_id=_CONVERSATION),
        "turn": _reverse("chat-turn", conversation_id=_CONVERSATION, request_id=_REQUEST),
        "apiRequest": _reverse("api-request", request_id=_REQUEST),
        "apiCancel": _reverse("api-request-cancel", request_id=_REQUEST),
        "apiApprove": _reverse("api-request-approve", request_id=_REQUEST, approval_request_id=_APPROVAL),
        "renderBlocks": _reverse("render-blocks"),
        "sidebar": _reverse("sidebar"),
        "wsRequest": socket_path("ws-request"),
        "wsConversation": socket_path("ws-conversation"),
    }


def share_url_templates(token: str) -> dict[str, str]:
    """What a shared page's script uses instead (`{% relay_assets %}` takes them from the page's
    `relay_urls`): its turns, sockets and access check through the link."""
    turn = _reverse("shared-turn", token=token, request_id=_REQUEST)
    return {
        "conversations": _reverse("shared", token=token),  # where a tab goes when the conversation is deleted
        "turn": turn,
        "apiRequest": turn,  # "may I still see it?": the link's answer
        "renderBlocks": _reverse("shared-render-blocks", token=token),
        "wsRequest": socket_path("ws-share-request").replace("{share}", token),
        "wsConversation": socket_path("ws-share-conversation").replace("{share}", token),
    }


def request_socket(request_id: object) -> str:
    """The path of the websocket that follows one request."""
    return socket_path("ws-request").replace("{request}", str(request_id))

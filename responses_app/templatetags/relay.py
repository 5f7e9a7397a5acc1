"""`{% load relay %}`: the app's template tags for its own pages and for any host template.

    {% relay_assets %}             the stylesheet, the script and the data they read: once per page

The script finds every address it uses in the page (`#relay-urls`): the app's URLs reversed
wherever the host included them, and its websocket routes under RELAY_WEBSOCKET_PREFIX (by
default, where the pages are). Nothing in the script assumes the site's root.
"""

from __future__ import annotations

import re

from django import template
from django.templatetags.static import static
from django.urls import reverse
from django.utils.html import format_html, json_script
from django.utils.safestring import SafeString, mark_safe

from ..conf import app_settings

register = template.Library()

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


def _socket(name: str) -> str:
    from ..routing import websocket_urlpatterns

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
        "wsRequest": _socket("ws-request"),
        "wsConversation": _socket("ws-conversation"),
    }


@register.simple_tag(takes_context=True)
def relay_assets(context: template.Context) -> SafeString:
    """The stylesheet, the words and addresses the script reads, and the script: once per page
    (a page with several embedded responses gets them once)."""
    from .relay_tags import vocabulary

    request = context.get("request")
    if request is not None:
        if getattr(request, "_relay_assets", False):
            return mark_safe("")
        request._relay_assets = True
    return format_html(
        '<link rel="stylesheet" href="{}">\n{}\n{}\n<script type="module" src="{}"></script>',
        static("responses_app/chat.css"),
        json_script(vocabulary(), "relay-vocabulary"),
        json_script(url_templates(), "relay-urls"),
        static("responses_app/chat/main.js"),
    )

"""`{% load relay %}`: the app's template tags for its own pages and for any host template.

    {% relay_assets %}             the stylesheet, the script and the data they read: once per page
    {% relay_response request %}   one answer as committed, followed live in the page (the assets
                                   included); `prompt=True` shows the user's prompt above it

`relay_response` takes a ResponseRequest (or its id) and reads the database: render it where a
sync view renders (an async view renders templates through `sync_to_async`). What it shows is
the committed view; following it live needs a viewer the request's socket admits (its owner, or
a user with the view_responserequest permission): the host decides who sees the page.

The script finds every address it uses in the page (`#relay-urls`): the app's URLs reversed
wherever the host included them, and its websocket routes under RELAY_WEBSOCKET_PREFIX (by
default, where the pages are). Nothing in the script assumes the site's root.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.template.loader import render_to_string
from django.templatetags.static import static
from django.utils.html import format_html, json_script
from django.utils.safestring import SafeString, mark_safe

from ..addresses import url_templates
from ..web import turns

register = template.Library()


@register.simple_tag(takes_context=True)
def relay_assets(context: template.Context) -> SafeString:
    """The stylesheet, the words and addresses the script reads, and the script: once per page
    (a page with several embedded responses gets them once)."""
    request = context.get("request")
    if request is not None:
        if getattr(request, "_relay_assets", False):
            return mark_safe("")
        request._relay_assets = True
    return format_html(
        # theme.js first and parser-blocking: the root has its theme before anything in it is drawn
        '<script src="{}"></script>\n<link rel="stylesheet" href="{}">\n'
        '<link rel="stylesheet" href="{}">\n<link rel="stylesheet" href="{}">\n{}\n{}\n'
        '<script type="module" src="{}"></script>',
        static("responses_app/theme.js"),
        static("responses_app/theme.css"),
        static("responses_app/chat.css"),
        static("responses_app/chat-tools.css"),
        json_script(turns.vocabulary(), "relay-vocabulary"),
        json_script({**url_templates(), **(context.get("relay_urls") or {})}, "relay-urls"),  # shared.html: its own
        static("responses_app/chat/main.js"),
    )


@register.simple_tag(takes_context=True)
def relay_response(context: template.Context, request: Any, prompt: bool = False) -> SafeString:
    from .. import selectors
    from ..models import ResponseRequest

    if not isinstance(request, ResponseRequest):
        request = ResponseRequest.objects.select_related("conversation").get(pk=request)
    http = context.get("request")
    user = getattr(http, "user", None) or context.get("user")
    can_cancel = bool(user is not None and selectors.can_cancel(user, request))
    turn = turns.turn_context(request, selectors.view_latest(request=request), can_cancel=can_cancel)
    html = render_to_string("responses_app/_turn.html", {**turn, "embed": not prompt}, request=http)
    return format_html('<div class="relay relay-embed">{}{}</div>', relay_assets(context), mark_safe(html))

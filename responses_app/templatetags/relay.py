"""`{% load relay %}`: the app's template tags for its own pages and for any host template.

    {% relay_assets %}             the stylesheet, the script and the data they read: once per page

The script finds every address it uses in the page (`#relay-urls`): the app's URLs reversed
wherever the host included them, and its websocket routes under RELAY_WEBSOCKET_PREFIX (by
default, where the pages are). Nothing in the script assumes the site's root.
"""

from __future__ import annotations

from django import template
from django.templatetags.static import static
from django.utils.html import format_html, json_script
from django.utils.safestring import SafeString, mark_safe

from ..addresses import url_templates

register = template.Library()


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

"""`{% load relay_tools %}`: the owner's "Share and export" panel of a conversation.

    {% conversation_tools conversation turns %}    its read-only links (make, copy, revoke) and exports
    {% turn_versions %}                           a turn's `‹ 2/3 ›` (in _turn.html)
    {% conversation_settings conversation %}      its Settings panel (the owner's)
"""

from __future__ import annotations

from typing import Any

from django import template
from django.template.loader import render_to_string
from django.urls import reverse

from ..conf import app_settings
from ..shares import shares_of

register = template.Library()


@register.inclusion_tag("responses_app/_conversation_tools.html", takes_context=True)
def conversation_tools(context: template.Context, conversation: Any, turns: Any = ()) -> dict[str, Any]:
    """`turns`: the chat page's turns (the branch shown), each one shareable alone."""
    http = context.get("request")
    new = http.GET.get("share") if http else None  # the link just made (share_links.share_create)
    links = [{"share": share, "new": new == str(share.pk),
              "url": http.build_absolute_uri(reverse("responses_app:shared", args=[share.token])) if http else ""}
             for share in shares_of(conversation=conversation)]
    return {
        "conversation": conversation,
        "turns": turns,
        "links": links,
        "anonymous_allowed": app_settings.SHARE_ANONYMOUS,
        "open": bool(http and http.GET.get("tools")),
        "csrf_token": context.get("csrf_token"),
    }


@register.simple_tag(takes_context=True)
def turn_versions(context: template.Context) -> str:
    """`‹ 2/3 ›` inside _turn.html: the turn's `versions` (branches.Versions), given to the partial
    directly or as a field of the chat page's `turn`; the arrows are the owner's (`can_post`).
    Nothing at all for a turn of one version (most of them: no template rendered per turn)."""
    turn = context.get("turn")
    versions = context.get("versions") or (turn.get("versions") if isinstance(turn, dict) else None)
    if versions is None or versions.count <= 1:
        return ""
    return render_to_string("responses_app/_versions.html", {
        "versions": versions, "request": context.get("request"), "can_post": context.get("can_post"),
        "csrf_token": context.get("csrf_token")})


@register.inclusion_tag("responses_app/_settings_panel.html", takes_context=True)
def conversation_settings(context: template.Context, conversation: Any) -> dict[str, Any]:
    """`{% conversation_settings conversation %}`: the owner's Settings panel (web/conversation_settings.py);
    the settings page gives its own form (what was typed, and the errors), open."""
    from ..web.conversation_settings import panel

    given = context.get("settings_form")
    return {**panel(conversation, given), "conversation": conversation, "open": given is not None and given.is_bound,
            "csrf_token": context.get("csrf_token")}

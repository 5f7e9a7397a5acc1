"""`{% load relay_tools %}`: the chat page's tools.

    {% turn_versions %}                           a turn's `‹ 2/3 ›` (in _turn.html)
"""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.inclusion_tag("responses_app/_versions.html", takes_context=True)
def turn_versions(context: template.Context) -> dict[str, Any]:
    """`‹ 2/3 ›` inside _turn.html: the turn's `versions` (branches.Versions), given to the partial
    directly or as a field of the chat page's `turn`; the arrows are the owner's (`can_post`)."""
    turn = context.get("turn")
    versions = context.get("versions") or (turn.get("versions") if isinstance(turn, dict) else None)
    return {"versions": versions, "request": context.get("request"), "can_post": context.get("can_post"),
            "csrf_token": context.get("csrf_token")}

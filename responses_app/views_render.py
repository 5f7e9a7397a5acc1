"""POST render/blocks: the blocks of a live answer rendered by the server, for the page's script.

The script holds the live view (wire.js applies the patches) and sends the blocks it needs drawn:
a block just added, or one whose fields other than its text changed. This answers each entry's
HTML through the templates the page itself is rendered with (`responses_app/blocks/`), so every
block kind's markup is written once; the script then only appends text and changes state. The
live view is the client's to send: the committed one (the turn partial) lags behind it.

It renders only what it is sent and reads no stored data, so it changes nothing and needs no
login: any page that shows a live answer can use it, a shared page without an account too.

    request   {"blocks": [view blocks], "entries": [block ids], "thought_s": n | null,
               "meta": {"error": ..., "incomplete_reason": ...}  (optional)}
    response  {"order": [the entry id of every block, in reading order],
               "entries": {entry id: html}, "notice": html | null}

A reasoning summary part is drawn inside its item's entry; asking for the part draws the entry.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.template.loader import render_to_string
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .templatetags.relay_tags import group_blocks, turn_notice

MAX_BLOCKS = 5000


def _bad(message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=400)


def _blocks(value: Any) -> list[dict[str, Any]] | None:
    if not isinstance(value, list) or len(value) > MAX_BLOCKS:
        return None
    if not all(isinstance(b, dict) and isinstance(b.get("id"), str) for b in value):
        return None
    return value


def render_entries(blocks: list[dict[str, Any]], wanted: set[str], thought_s: int | None
                   ) -> tuple[list[str], dict[str, str]]:
    """Every entry's id in reading order, and the HTML of the entries holding a wanted block."""
    order: list[str] = []
    html: dict[str, str] = {}
    for entry in group_blocks(blocks, thought_s):
        entry_id = str(entry.get("id"))
        order.append(entry_id)
        ids = {entry_id, *(str(part.get("id")) for part in entry.get("parts") or ())}
        if ids & wanted:
            html[entry_id] = render_to_string("responses_app/_block.html", {"block": entry, "live": True}).strip()
    return order, html


@csrf_exempt  # renders what it is sent, changes nothing: as safe as a GET
@require_POST
def render_blocks(http: HttpRequest) -> JsonResponse:
    try:
        data = json.loads(http.body)
    except ValueError:
        return _bad("the body is not JSON")
    if not isinstance(data, dict):
        return _bad("the body is not a JSON object")
    blocks = _blocks(data.get("blocks"))
    entries = data.get("entries")
    thought_s = data.get("thought_s")
    if blocks is None:
        return _bad(f"blocks: a list of at most {MAX_BLOCKS} objects, each with a string id")
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return _bad("entries: a list of block ids")
    if thought_s is not None and (not isinstance(thought_s, int) or isinstance(thought_s, bool)):
        return _bad("thought_s: a whole number of seconds, or null")
    try:
        order, html = render_entries(blocks, set(entries), thought_s)
    except (TypeError, AttributeError, ValueError):  # a field of a block of the wrong JSON type
        return _bad("blocks: a block has a field of the wrong type")
    notice = None
    meta = data.get("meta")
    if isinstance(meta, dict):
        error = meta.get("error") if isinstance(meta.get("error"), dict) else None
        reason = meta.get("incomplete_reason")
        reason = reason if isinstance(reason, str) else ""
        notice = str(turn_notice(error, reason, {"blocks": blocks}))
    return JsonResponse({"order": order, "entries": html, "notice": notice})

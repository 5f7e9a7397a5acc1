"""POST render/blocks: the blocks of a live answer rendered by the server, for the page's script.

The script holds the live view (wire.js applies the patches) and sends the blocks it needs drawn:
a block just added, or one whose fields other than its text changed. This answers each entry's
HTML through the templates the page itself is rendered with (`responses_app/blocks/`), so every
block kind's markup is written once; the script then only appends text and changes state. The
live view is the client's to send: the committed one (the turn partial) lags behind it.

It renders only what it is sent and reads no stored data, but rendering costs CPU, so it answers
only the page's own session: a signed-in user (`render/blocks`), or a viewer of an open share link
(`s/<token>/render/blocks`, the shared page's address for it), with the page's CSRF token. Before
any work it refuses a body over MAX_BODY_BYTES (413) and more than RENDER_RATE requests per
window for one user, or one link and address (429 with Retry-After).

    request   {"blocks": [view blocks], "entries": [block ids], "thought_s": n | null,
               "meta": {"error": ..., "incomplete_reason": ...}  (optional)}
    response  {"order": [the entry id of every block, in reading order],
               "entries": {entry id: html}, "notice": html | null}

A reasoning summary part is drawn inside its item's entry; asking for the part draws the entry.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from .. import limits, selectors
from ..blockwords import group_blocks
from .turns import turn_notice

MAX_BLOCKS = 5000
# The page sends no Markdown text (its box holds it) and an image's first characters only: what
# is left is the blocks' fields, tool calls' arguments and outputs the largest.
MAX_BODY_BYTES = 512 * 1024
RENDER_RATE = (120, 60)  # requests per seconds: one in flight per turn, a few per second at most


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


@require_POST
def render_blocks(http: HttpRequest) -> JsonResponse:
    if not http.user.is_authenticated:
        return JsonResponse({"error": "Sign in to draw blocks."}, status=403)
    return _render(http, f"user:{http.user.pk}")


@require_POST
def shared_render_blocks(http: HttpRequest, token: str) -> JsonResponse:
    """The same, for a page open through a share link while the link is open."""
    if selectors.share_open(token=token, user=http.user) is None:
        return JsonResponse({"error": "This link does not work (any more)."}, status=403)
    who = f"user:{http.user.pk}" if http.user.is_authenticated else \
        f"share:{hashlib.sha256(token.encode()).hexdigest()[:32]}:{http.META.get('REMOTE_ADDR', '')}"
    return _render(http, who)


def _too_big(http: HttpRequest) -> bool:
    try:
        declared = int(http.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    return declared > MAX_BODY_BYTES or len(http.body) > MAX_BODY_BYTES


def _render(http: HttpRequest, who: str) -> JsonResponse:
    if _too_big(http):
        return JsonResponse({"error": f"The body takes at most {MAX_BODY_BYTES} bytes."}, status=413)
    refusal = limits.rate_check(key=f"render-rate:{who}", rate=RENDER_RATE, now=time.time())
    if refusal is not None:
        return limits.refusal_answer(JsonResponse(refusal.body()), status=429, retry_after=refusal.retry_after)
    try:
        data = json.loads(http.body)
    except (ValueError, RecursionError):  # RecursionError: arrays or objects nested too deep
        return _bad("the body is not JSON (or nests too deep)")
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

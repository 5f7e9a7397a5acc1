"""Find and take out: search across one's own conversations (search.py), results linking to the
turn (its version opened for that page view, versions.version_link; a hit in a version
the conversation does not show says so); export a conversation's branch shown as
Markdown or JSON (export.py). Both only ever the user's own: another user's conversation is a
404 here, staff included.
"""

from __future__ import annotations

import json
import re
import time
import uuid

import orjson
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from .. import branches, limits, selectors
from .. import search as searching
from ..conf import app_settings
from ..forms import unstorable
from . import export as exports
from .pages import page
from .versions import version_link


@login_required
@require_GET
def search(http: HttpRequest) -> HttpResponse:
    """At most RELAY_SEARCH_RATE searches per user (429 and Retry-After past it); a query no
    database takes (U+0000) is a 400 that says so. Archived conversations are left out unless
    `archived=1` (the form's "Include archived" box, kept in the address)."""
    query = http.GET.get("q", "")
    shown = " ".join(query.split())[:searching.MAX_QUERY_CHARS]
    archived = http.GET.get("archived") == "1"
    context = {"query": shown, "hits": [], "limit": searching.MAX_RESULTS, "include_archived": archived}
    if unstorable(query):
        return page(http, "responses_app/search.html", {
            **context, "query": shown.replace("\x00", ""),
            "error": "A search cannot contain U+0000 (a NUL character) or a lone surrogate."}, status=400)
    if shown:
        refusal = limits.rate_check(key=f"search-rate:{http.user.pk}", rate=app_settings.SEARCH_RATE,
                                    now=time.time(), what="searches")
        if refusal is not None:
            return limits.refusal_answer(page(http, "responses_app/search.html", {**context, "error": refusal.message}),
                                         status=429, retry_after=refusal.retry_after)
    hits = searching.search_turns(user=http.user, query=query, archived=archived)
    return page(http, "responses_app/search.html", {**context, "hits": [
        {"hit": hit, "link": version_link(hit.conversation_id, hit.request_id), "age": age}
        for hit, age in zip(hits, _version_ages(hits), strict=True)]})


def _version_ages(hits: list[searching.Hit]) -> list[str | None]:
    """Each hit's version beside the branch its conversation shows: None when on it, else
    "older" or "newer" (one tree per conversation found)."""
    trees: dict[uuid.UUID, tuple[branches.Tree, list[uuid.UUID]]] = {}
    ages = []
    for hit in hits:
        if hit.conversation_id not in trees:
            turns = branches.tree(hit.conversation_id)
            leaf = turns.leaf(branches.chosen_leaf_id(hit.conversation_id))
            trees[hit.conversation_id] = (turns, turns.path(leaf) if leaf is not None else [])
        turns, shown = trees[hit.conversation_id]
        ages.append(branches.version_age(turns, shown, hit.request_id))
    return ages


def _filename(title: str, extension: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").lower()[:60] or "conversation"
    return f"{stem}.{extension}"


@login_required
@require_GET
def export(http: HttpRequest, conversation_id: uuid.UUID, fmt: str) -> HttpResponse:
    """`export.md` or `export.json`: a download of the branch shown, committed views only."""
    conversation = selectors.conversation_open_for_user(user=http.user, conversation_id=conversation_id)
    if conversation is None or not selectors.is_owner(http.user, conversation) or fmt not in ("md", "json"):
        raise Http404("No such conversation")
    if fmt == "md":
        response = HttpResponse(exports.conversation_markdown(conversation),
                                content_type="text/markdown; charset=utf-8")
    else:
        data = exports.conversation_json(conversation)
        try:
            body = orjson.dumps(data, option=orjson.OPT_INDENT_2)
        except TypeError:  # what orjson refuses (a lone surrogate kept in a prompt): escaped
            body = json.dumps(data, indent=2).encode()
        response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{_filename(str(conversation), fmt)}"'
    response["Cache-Control"] = "private, no-store"
    return response

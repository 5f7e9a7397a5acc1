"""Versions of a turn: the branch through one of them, shown in every tab.

`‹ 2/3 ›` beside a turn are forms (the owner's) that POST here: the branch through that version
is saved as the conversation's own (branches.branch_select); the script sends them with fetch and
gets the branch's turn ids (every other tab hears of it on the conversation socket); without
JavaScript the page reloads at the turn. A GET (a search result, any link to a turn) changes
nothing: it opens the chat page with that version for that page view only (`?version=`, see
`version_link`), the conversation's saved choice kept. Viewers who are not the owner follow the
owner's choice and change nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from .. import branches, selectors
from ..conversation_events import announce

VERSION_PARAM = "version"


def version_link(conversation_id: Any, request_id: Any) -> str:
    """The chat page showing the branch through this turn for one page view, at the turn."""
    url = reverse("responses_app:chat", args=[conversation_id])
    return f"{url}?{VERSION_PARAM}={request_id}#turn-{request_id}"


def version_asked(http: HttpRequest) -> uuid.UUID | None:
    """The turn a GET of the chat page asks to be shown through (`?version=`), if well formed."""
    try:
        return uuid.UUID(http.GET.get(VERSION_PARAM, ""))
    except ValueError:
        return None


def _show(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> tuple[list[str], bool]:
    conversation = selectors.conversation_open_for_user(user=http.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation")
    if not selectors.is_owner(http.user, conversation):
        raise PermissionDenied("Only the owner picks the version shown")
    shown = branches.branch_select(conversation=conversation, request_id=request_id)
    if shown is None:
        raise Http404("No such turn")
    return shown


def _turn_exists(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> None:
    request = selectors.request_get_for_user(user=http.user, request_id=request_id)
    if request is None or request.conversation_id != conversation_id:
        raise Http404("No such turn")


@login_required
@require_http_methods(["GET", "POST"])
async def chat_show(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> HttpResponse:
    """POST: show the branch through this turn from now on (every tab follows), then the turn.
    GET: the chat page with that version for this page view only; nothing saved."""
    if http.method != "POST":
        await sync_to_async(_turn_exists)(http, conversation_id, request_id)
        return HttpResponseRedirect(version_link(conversation_id, request_id))
    ids, changed = await sync_to_async(_show)(http, conversation_id, request_id)
    if changed:
        await announce(conversation_id, {"type": "branch", "ids": ids})
    if "application/json" in http.headers.get("accept", ""):
        return JsonResponse({"ids": ids})
    return HttpResponseRedirect(f"{reverse('responses_app:chat', args=[conversation_id])}#turn-{request_id}")

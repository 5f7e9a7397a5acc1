"""Versions of a turn: the branch through one of them, shown in every tab.

`‹ 2/3 ›` beside a turn are forms (the owner's) that POST here: the script sends them with fetch
and gets the branch's turn ids (every other tab hears of it on the conversation socket); without
JavaScript the page reloads at the turn. A GET (a search result, any link to a turn) shows the
branch through that turn the same way, then opens the chat page at it. Viewers who are not the
owner follow the owner's choice and change nothing.
"""

from __future__ import annotations

import uuid

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from .. import branches, selectors
from ..conversation_events import announce


def _show(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> tuple[list[str], bool]:
    conversation = selectors.conversation_open_for_user(user=http.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation")
    if not selectors.is_owner(http.user, conversation):
        if http.method == "POST":
            raise PermissionDenied("Only the owner picks the version shown")
        return selectors.conversation_turn_ids(conversation_id=conversation.pk), False
    shown = branches.branch_select(conversation=conversation, request_id=request_id)
    if shown is None:
        raise Http404("No such turn")
    return shown


@login_required
@require_http_methods(["GET", "POST"])
async def chat_show(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> HttpResponse:
    """Show the branch through this turn (every tab follows), then the turn."""
    ids, changed = await sync_to_async(_show)(http, conversation_id, request_id)
    if changed:
        await announce(conversation_id, {"type": "branch", "ids": ids})
    if "application/json" in http.headers.get("accept", ""):
        return JsonResponse({"ids": ids})
    return HttpResponseRedirect(f"{reverse('responses_app:chat', args=[conversation_id])}#turn-{request_id}")

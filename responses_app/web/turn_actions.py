"""Continue: a stopped or cut-short answer goes on where it ended, in the same turn (continuing.py).

The owner's Continue button, beside the last answer of the branch when it was stopped or ended
early, is a form: without JavaScript it posts here and the page reloads at the turn, the
continuation streaming below the answer so far; conversation.js sends it with fetch and swaps the
turn for its server rendering, followed live. A refusal says why in words: not the owner (403),
not the last answer, still running or already complete (409).
"""

from __future__ import annotations

import uuid

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from .. import continuing, idempotency, selectors, submission
from ..submission import Refused, Submitted
from . import pages

HEADINGS = {403: "Not your conversation", 404: "No such answer", 409: "This answer cannot be continued"}


def _continue(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> tuple[Submitted, uuid.UUID]:
    conversation = selectors.conversation_open_for_user(user=http.user, conversation_id=conversation_id)
    if conversation is None:
        raise Refused(404, "not_found", "There is no such conversation, or it was deleted.")
    if not selectors.is_owner(http.user, conversation):
        raise Refused(403, "forbidden", continuing.NOT_OWNER)
    source = selectors.request_get_for_user(user=http.user, request_id=request_id)
    if source is None or source.conversation_id != conversation.pk:
        raise Refused(404, "not_found", "There is no such answer in this conversation.")
    key = idempotency.fitted(http.POST.get("client_request_id", "").strip()) or str(uuid.uuid4())
    done = submission.continue_answer(user=http.user, source=source, client_request_id=key)
    return done, continuing.turn_of(done.request).head.pk


@login_required
@require_POST
async def chat_continue(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> HttpResponse:
    """Continue this answer: a new request chained to it, shown as the rest of the same answer."""
    try:
        done, head = await sync_to_async(_continue)(http, conversation_id, request_id)
    except Refused as refused:
        if "application/json" in http.headers.get("accept", ""):
            return refused.answer()
        back = [(reverse("responses_app:chat", args=[conversation_id]), "Back to the conversation")]
        page = await sync_to_async(pages.refused_page)(
            http, refused.status, HEADINGS.get(refused.status, "Not continued"), refused.message,
            back if refused.status != 404 else None)
        return refused.answer(page)
    await submission.start(done)
    if "application/json" in http.headers.get("accept", ""):
        return JsonResponse({"id": str(done.request.pk), "turn": str(head), "status": done.request.status},
                            status=201 if done.created else 200)
    return HttpResponseRedirect(f"{reverse('responses_app:chat', args=[conversation_id])}#turn-{head}")

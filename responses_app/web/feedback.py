"""Feedback on an answer: its owner rates it helpful or not and may add a note (feedback.py).

The form beside an ended answer POSTs here: the script sends it with fetch and gets the rating
back as JSON; without JavaScript the page reloads at the turn. Pressing the rating already given
takes it back (unless the note changed with it); "Save note" keeps the rating and stores the note.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from .. import feedback, selectors
from ..models import AnswerFeedback

NEEDS_RATING = "Choose Helpful or Not helpful first, then save a note."
NOT_ENDED = "This answer is still being written; rate it once it has ended."


@login_required
@require_POST
def chat_feedback(http: HttpRequest, conversation_id: uuid.UUID, request_id: uuid.UUID) -> HttpResponse:
    request = selectors.request_get_for_user(user=http.user, request_id=request_id)
    if request is None or request.conversation_id != conversation_id or not selectors.is_owner(http.user, request):
        raise Http404("No such answer")
    wants_json = "application/json" in http.headers.get("accept", "")
    back = f"{reverse('responses_app:chat', args=[conversation_id])}#turn-{request_id}"
    if not request.is_terminal:
        return _refused(wants_json, NOT_ENDED, 409)
    given = feedback.of_user(user=http.user, request_ids=[request.pk]).get(request.pk)
    action = http.POST.get("rating", "")
    note = http.POST.get("note")
    if action == "note":
        if given is None:
            return _refused(wants_json, NEEDS_RATING, 400)
        rating: int | None = given.rating
    elif action in feedback.RATINGS:
        rating = int(feedback.RATINGS[action])
        if given is not None and given.rating == rating and note in (None, given.note):
            rating = None  # the rating already given, pressed again (the note unchanged): taken back
    else:
        return _refused(wants_json, "Say whether the answer helped.", 400)
    saved = feedback.give(request=request, user=http.user, rating=rating, note=note)
    if wants_json:
        return JsonResponse(_answer(saved))
    return HttpResponseRedirect(back)


def _answer(saved: AnswerFeedback | None) -> dict[str, object]:
    return {"rating": {1: "up", -1: "down"}.get(saved.rating, "") if saved else "", "note": saved.note if saved else ""}


def _refused(wants_json: bool, message: str, status: int) -> HttpResponse:
    if wants_json:
        return JsonResponse({"error": message}, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")

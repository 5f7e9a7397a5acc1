"""Feedback on answers: a person rates an answer of theirs helpful or not, with an optional note;
one rating per person and answer, changed or taken back at will. The analytics count the ratings
and list the latest notes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from .models import AnswerFeedback, ResponseRequest

MAX_NOTE_CHARS = 2000
RATINGS = {"up": AnswerFeedback.Rating.UP, "down": AnswerFeedback.Rating.DOWN}
LATEST_NOTES = 10


def give(*, request: ResponseRequest, user: User | AnonymousUser, rating: int | None,
         note: str | None = None) -> AnswerFeedback | None:
    """Store `user`'s rating of `request`'s answer (None: take it back); `note` None keeps the one
    stored. The row, or None when there is none now."""
    if user.pk is None:
        raise ValueError("feedback is given by a signed-in person")
    with transaction.atomic():
        if rating is None:
            AnswerFeedback.objects.filter(request=request, user_id=user.pk).delete()
            return None
        fields: dict[str, Any] = {"rating": rating, "updated": timezone.now()}
        if note is not None:
            fields["note"] = note[:MAX_NOTE_CHARS]
        feedback, _ = AnswerFeedback.objects.update_or_create(request=request, user_id=user.pk, defaults=fields)
        return feedback


def of_user(*, user: User | AnonymousUser, request_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, AnswerFeedback]:
    """`user`'s feedback on each of these answers that has some, in one query."""
    if not user.is_authenticated:
        return {}
    return {f.request_id: f for f in AnswerFeedback.objects.filter(user_id=user.pk, request_id__in=list(request_ids))}


def summary(*, since: Any, until: Any) -> dict[str, Any]:
    """Ratings given in the period (by their last change): counts, and the latest notes."""
    rows = AnswerFeedback.objects.filter(updated__gte=since, updated__lt=until)
    counts = rows.aggregate(up=Count("pk", filter=Q(rating=AnswerFeedback.Rating.UP)),
                            down=Count("pk", filter=Q(rating=AnswerFeedback.Rating.DOWN)))
    rated = counts["up"] + counts["down"]
    notes = list(rows.exclude(note="").select_related("request").order_by("-updated")[:LATEST_NOTES])
    return {"up": counts["up"], "down": counts["down"],
            "helpful_percent": round(100 * counts["up"] / rated) if rated else None, "notes": notes}

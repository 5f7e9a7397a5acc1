"""Reads. Access rules live here: a request is visible to its owner and to staff, nobody else."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import OuterRef, QuerySet, Subquery

from .models import Checkpoint, Conversation, ResponseRequest, ToolCall

EMPTY_VIEW: dict[str, Any] = {"revision": 0, "meta": {"response_id": None, "status": None}, "blocks": []}


def can_view(user: User | AnonymousUser, request: ResponseRequest) -> bool:
    return bool(user.is_authenticated and (request.owner_id == user.pk or user.is_staff))  # type: ignore[attr-defined]


def request_get_for_user(
    *, user: User | AnonymousUser, request_id: uuid.UUID | str
) -> ResponseRequest | None:
    if not user.is_authenticated:
        return None
    try:
        request = ResponseRequest.objects.select_related("conversation").get(pk=request_id)
    except (ResponseRequest.DoesNotExist, ValueError, TypeError):
        return None
    return request if can_view(user, request) else None


def checkpoint_latest(*, request_id: uuid.UUID) -> Checkpoint | None:
    return Checkpoint.objects.filter(request_id=request_id).order_by("-revision").first()


def view_latest(*, request: ResponseRequest) -> dict[str, Any]:
    """The latest committed view, or an empty one that carries the request's status."""
    checkpoint = checkpoint_latest(request_id=request.pk)
    if checkpoint is not None:
        return checkpoint.view  # type: ignore[no-any-return]
    view = dict(EMPTY_VIEW, meta={"response_id": request.response_id or None, "status": None})
    return view


def conversations_for_user(*, user: User) -> QuerySet[Conversation]:
    return Conversation.objects.filter(owner=user).order_by("-updated")


def conversation_get_for_user(*, user: User, conversation_id: uuid.UUID | str) -> Conversation | None:
    try:
        conversation = Conversation.objects.get(pk=conversation_id)
    except (Conversation.DoesNotExist, ValueError, TypeError):
        return None
    if conversation.owner_id != user.pk and not user.is_staff:  # type: ignore[attr-defined]
        return None
    return conversation


def conversation_turns(*, conversation: Conversation) -> list[tuple[ResponseRequest, dict[str, Any]]]:
    """Every request of a conversation with its latest committed view (two queries)."""
    latest = Checkpoint.objects.filter(request=OuterRef("pk")).order_by("-revision").values("pk")[:1]
    requests = list(conversation.requests.order_by("created").annotate(latest_checkpoint=Subquery(latest)))
    ids = [r.latest_checkpoint for r in requests if r.latest_checkpoint]  # type: ignore[attr-defined]
    views = dict(Checkpoint.objects.filter(pk__in=ids).values_list("request_id", "view"))
    return [(r, views.get(r.pk) or view_latest(request=r)) for r in requests]


def tool_call_output(*, request_id: uuid.UUID, call_id: str) -> str | None:
    """The stored output of this request's call `call_id` (None when it never ran here)."""
    return ToolCall.objects.filter(request_id=request_id, call_id=call_id).values_list(
        "output", flat=True).first()

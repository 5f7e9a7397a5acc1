"""The owner's lists of conversations: the sidebar's (the most recent, pinned first, each marked live
while one of its answers is being written) and the list page's (pinned first; archived ones in a
view of their own); pin, archive, and the Undo of a Delete (rows are soft-deleted: `deleted_at`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.utils import timezone

from .models import Conversation, ResponseRequest

SIDEBAR_SIZE = 30  # the sidebar's conversations; the list page has them all
UNDO_S = 600  # how long a Delete can be undone
IN_FLIGHT = [ResponseRequest.Status.PENDING, ResponseRequest.Status.STREAMING]


def listed(*, user: Any, archived: bool = False) -> QuerySet[Conversation]:
    """The user's own conversations, not deleted, pinned first, then the most recently updated;
    the archived ones instead with `archived`."""
    pinned_first = Case(When(pinned_at__isnull=False, then=Value(0)), default=Value(1), output_field=IntegerField())
    return (Conversation.objects.filter(owner=user, deleted_at__isnull=True, archived_at__isnull=not archived)
            .order_by(pinned_first, "-updated"))


def archived_count(*, user: Any) -> int:
    return listed(user=user, archived=True).count()


def live_ids(conversation_ids: list[Any]) -> set[uuid.UUID]:
    """Those of `conversation_ids` with a request in flight (pending or streaming)."""
    rows = ResponseRequest.objects.filter(conversation_id__in=conversation_ids, status__in=IN_FLIGHT)
    return set(rows.values_list("conversation_id", flat=True).distinct())


@dataclass(frozen=True)
class SidebarItem:
    conversation: Conversation
    live: bool
    current: bool


@dataclass(frozen=True)
class Sidebar:
    items: list[SidebarItem]
    more: bool  # more conversations than shown: the list page has them


def sidebar(*, user: Any, current: Any = None) -> Sidebar:
    """The sidebar of `user`: two queries, however many conversations are listed."""
    rows = list(listed(user=user)[:SIDEBAR_SIZE + 1])
    shown = rows[:SIDEBAR_SIZE]
    live = live_ids([c.pk for c in shown])
    current = str(current) if current else None
    return Sidebar(items=[SidebarItem(c, c.pk in live, str(c.pk) == current) for c in shown],
                   more=len(rows) > SIDEBAR_SIZE)


Mark = Literal["pinned", "archived"]
# Each mark and the field that holds it: when it was set, None while it is not.
MARK_FIELDS: dict[Mark, str] = {"pinned": "pinned_at", "archived": "archived_at"}


def set_mark(*, conversation: Conversation, mark: Mark, on: bool) -> None:
    """Pin or unpin, archive or unarchive: the mark's time set (now) or cleared; nothing written
    when it already is as asked, so pinning twice keeps the first pin's place."""
    field = MARK_FIELDS.get(mark)
    if field is None:
        raise ValueError(f"No mark {mark!r}: a conversation is marked {' or '.join(MARK_FIELDS)}.")
    if on == (getattr(conversation, field) is not None):
        return
    setattr(conversation, field, timezone.now() if on else None)
    Conversation.objects.filter(pk=conversation.pk).update(**{field: getattr(conversation, field)})


def undoable(*, user: Any, conversation_id: Any, now: datetime | None = None) -> Conversation | None:
    """The user's own conversation deleted less than UNDO_S ago: its Delete can be undone."""
    if not getattr(user, "is_authenticated", False):
        return None
    try:
        pk = uuid.UUID(str(conversation_id))
    except ValueError:
        return None
    since = (now or timezone.now()) - timedelta(seconds=UNDO_S)
    return Conversation.objects.filter(pk=pk, owner=user, deleted_at__gte=since).first()


def undo_until(conversation: Conversation) -> datetime:
    assert conversation.deleted_at is not None
    return conversation.deleted_at + timedelta(seconds=UNDO_S)


def restore(*, conversation: Conversation) -> None:
    """Undo a Delete: the conversation is back in its owner's pages. Answers the Delete stopped
    stay stopped."""
    Conversation.objects.filter(pk=conversation.pk).update(deleted_at=None)
    conversation.deleted_at = None

"""Writes. Every state change of a request goes through here; status transitions are guarded in
the database (conditional UPDATEs), so two runners, tabs or retries cannot both win."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, cast

from django.contrib.auth.models import User
from django.db import IntegrityError, connection, models, transaction
from django.db.models import F, Q
from django.utils import timezone

from .models import Checkpoint, Conversation, EventRecord, ResponseRequest, Segment, ToolCall

Status = ResponseRequest.Status
LEASE_SECONDS = 30


class TransitionError(Exception):
    """A status change that the request's current state does not allow."""


def conversation_create(*, owner: User, title: str = "") -> Conversation:
    return Conversation.objects.create(owner=owner, title=title[:200])


def request_create(
    *,
    owner: User,
    input: Any,
    model: str,
    client_request_id: str,
    conversation: Conversation | None = None,
    params: dict[str, Any] | None = None,
) -> tuple[ResponseRequest, bool]:
    """Create the logical request, or return the one this idempotency key already made."""
    existing = ResponseRequest.objects.filter(owner=owner, client_request_id=client_request_id).first()
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            request = ResponseRequest.objects.create(
                owner=owner,
                conversation=conversation,
                client_request_id=client_request_id,
                model=model,
                input=input,
                params=params or {},
            )
    except IntegrityError:  # a concurrent submit with the same key won the race
        return ResponseRequest.objects.get(owner=owner, client_request_id=client_request_id), False
    if conversation is not None:
        updates: dict[str, Any] = {"updated": request.created}
        if not conversation.title:
            updates["title"] = _title_from(request.prompt_text)
        Conversation.objects.filter(pk=conversation.pk).update(**updates)
    return request, True


def request_acquire_lease(*, request_id: uuid.UUID, token: uuid.UUID, now: datetime | None = None) -> bool:
    """Single-flight: take the request for one runner. True only for the one that wins."""
    now = now or timezone.now()
    won = ResponseRequest.objects.filter(
        Q(status=Status.PENDING) | Q(status=Status.STREAMING, lease_expires__lt=now), pk=request_id
    ).update(status=Status.STREAMING, runner_token=token, lease_expires=now + timedelta(seconds=LEASE_SECONDS))
    return won == 1


def leases_renew(*, leases: list[tuple[uuid.UUID, uuid.UUID]], renew: bool = True) -> set[uuid.UUID]:
    """Extend the leases of every runner in a process at once (unless `renew` is false: a read
    only); returns the requests among them whose Stop was pressed meanwhile."""
    cancelled: set[uuid.UUID] = set()
    for start in range(0, len(leases), 500):
        chunk = leases[start:start + 500]
        if renew:
            held = Q()
            for request_id, token in chunk:
                held |= Q(pk=request_id, runner_token=token)
            ResponseRequest.objects.filter(held, status=Status.STREAMING).update(
                lease_expires=timezone.now() + timedelta(seconds=LEASE_SECONDS))
        cancelled.update(ResponseRequest.objects.filter(
            pk__in=[request_id for request_id, _token in chunk], cancel_requested=True).values_list("pk", flat=True))
    return cancelled


def requests_to_recover(*, now: datetime | None = None, pending_after_s: int = 10) -> list[uuid.UUID]:
    """Streaming requests whose runner died (lease expired), and pending ones nobody started."""
    now = now or timezone.now()
    stale = Q(status=Status.STREAMING, lease_expires__lt=now) | Q(
        status=Status.PENDING, created__lt=now - timedelta(seconds=pending_after_s))
    return list(ResponseRequest.objects.filter(stale).values_list("pk", flat=True)[:1000])


def request_set_response_id(*, request_id: uuid.UUID, response_id: str, at: datetime) -> None:
    """Stored the moment response.created arrives, before anything else can go wrong."""
    ResponseRequest.objects.filter(pk=request_id).update(response_id=response_id)
    ResponseRequest.objects.filter(pk=request_id, upstream_created_at__isnull=True).update(upstream_created_at=at)


def request_mark_first(*, request_id: uuid.UUID, field: str, at: datetime) -> None:
    if field not in ("first_text_at", "first_tool_at"):
        raise ValueError(field)
    ResponseRequest.objects.filter(pk=request_id, **{f"{field}__isnull": True}).update(**{field: at})


def request_mark_terminal(
    *,
    request_id: uuid.UUID,
    token: uuid.UUID | None,
    status: str,
    at: datetime,
    error_code: str = "",
    error_message: str = "",
    incomplete_reason: str = "",
    usage: dict[str, Any] | None = None,
    final_text: str = "",
    counters: dict[str, int] | None = None,
    response_id: str = "",
) -> bool:
    """The one place a request becomes terminal (or unknown). Guarded by the runner's lease token."""
    if status not in ResponseRequest.TERMINAL and status != Status.UNKNOWN:
        raise TransitionError(f"{status!r} is not an outcome")
    query = ResponseRequest.objects.filter(pk=request_id, status__in=[Status.STREAMING, Status.PENDING])
    if token is not None:
        query = query.filter(runner_token=token)
    request = ResponseRequest.objects.only("created").get(pk=request_id)
    fields: dict[str, Any] = {
        "status": status,
        "terminal_at": at,
        "duration_ms": max(0, int((at - request.created).total_seconds() * 1000)),
        "error_code": (error_code or "")[:100],
        "error_message": error_message or "",
        "incomplete_reason": (incomplete_reason or "")[:100],
        "usage": usage,
        "final_text": final_text,
        "lease_expires": None,
        **(counters or {}),
    }
    if response_id:
        fields["response_id"] = response_id
    updated = query.update(**fields) == 1
    if updated and response_id and status == Status.COMPLETED:
        Conversation.objects.filter(requests__pk=request_id).update(last_response_id=response_id, updated=at)
    return updated


def request_cancel(*, request: ResponseRequest) -> bool:
    """The explicit Stop. Pending requests end at once; streaming ones are told to stop."""
    ResponseRequest.objects.filter(pk=request.pk).update(cancels=F("cancels") + 1)
    if ResponseRequest.objects.filter(pk=request.pk, status=Status.PENDING).update(
        status=Status.CANCELLED, cancel_requested=True, terminal_at=timezone.now()
    ):
        return True
    return ResponseRequest.objects.filter(pk=request.pk, status=Status.STREAMING).update(cancel_requested=True) == 1


def request_count(*, request_id: uuid.UUID, **increments: int) -> None:
    """Add to counters (viewer_connections, reconnects, disconnects, retries ...)."""
    if increments:
        ResponseRequest.objects.filter(pk=request_id).update(**{k: F(k) + v for k, v in increments.items()})


def segment_start(
    *, request_id: uuid.UUID, index: int, kind: str, starting_after: int | None = None, response_id: str = ""
) -> Segment:
    return Segment.objects.create(
        request_id=request_id, index=index, kind=kind, starting_after=starting_after, response_id=response_id
    )


def segment_end(
    *, segment_id: int, outcome: str, events: int, response_id: str = "", http_status: int | None = None,
    detail: str = "",
) -> None:
    fields: dict[str, Any] = {"outcome": outcome[:32], "events": events, "ended_at": timezone.now(),
                              "detail": detail}
    if response_id:
        fields["response_id"] = response_id
    if http_status is not None:
        fields["http_status"] = http_status
    Segment.objects.filter(pk=segment_id).update(**fields)


def checkpoints_commit_many(
    *, items: list[tuple[uuid.UUID, dict[str, Any] | None, list[dict[str, Any]]]]
) -> None:
    """Several requests' checkpoints and event batches: one transaction, two multi-row INSERTs."""
    now = timezone.now()
    records = [dict(b, request_id=request_id, created=now) for request_id, _state, batches in items for b in batches]
    checkpoints = [dict(state, request_id=request_id, created=now) for request_id, state, _b in items if state]
    with transaction.atomic():
        _insert_rows(EventRecord, records)
        _insert_rows(Checkpoint, checkpoints)


def _insert_rows(model: type[models.Model], rows: list[dict[str, Any]]) -> None:
    """One multi-row INSERT, values adapted by each field as the ORM would.

    Not `bulk_create`: on PostgreSQL, Django 5.2 sends it as UNNEST over arrays, and psycopg
    quotes every element of an array of strings in Python, one regex callback per quote
    character. For checkpoints (JSON, full of quotes) that cost 40% of a core at 100 streams,
    all of it holding the GIL the event loop needs. Plain parameters are quoted by libpq."""
    if len(rows) > 2000:  # PostgreSQL takes at most 65,535 parameters per statement
        for start in range(0, len(rows), 2000):
            _insert_rows(model, rows[start:start + 2000])
        return
    if not rows:
        return
    names = list(rows[0])
    # "request_id" finds the foreign key
    fields = [cast("models.Field[Any, Any]", model._meta.get_field(name)) for name in names]
    columns = ", ".join(connection.ops.quote_name(f.column or f.name) for f in fields)
    row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params = [f.get_db_prep_save(row[name], connection) for row in rows for name, f in zip(names, fields, strict=True)]
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} ({columns}) VALUES "
                       + ", ".join([row_sql] * len(rows)), params)


def tool_call_claim(*, request_id: uuid.UUID, call_id: str, name: str, arguments: Any) -> ToolCall | None:
    """Claim a call id for execution; None when it was claimed before (it ran, or is running)."""
    try:
        with transaction.atomic():
            return ToolCall.objects.create(request_id=request_id, call_id=call_id, name=name, arguments=arguments)
    except IntegrityError:
        return None


def tool_call_finish(*, call_id: str, output: str, ok: bool) -> None:
    ToolCall.objects.filter(call_id=call_id).update(
        output=output, status=ToolCall.Status.DONE if ok else ToolCall.Status.FAILED, finished_at=timezone.now()
    )


def _title_from(prompt: str) -> str:
    line = " ".join(prompt.split())
    return line if len(line) <= 60 else line[:57].rstrip() + "..."


# --- conversation actions -----------------------------------------------------------------------

def conversation_rename(*, conversation: Conversation, title: str) -> str:
    title = " ".join(title.split())[:200]
    if not title:
        raise ValueError("A title cannot be empty.")
    Conversation.objects.filter(pk=conversation.pk).update(title=title)
    conversation.title = title
    return title


def conversation_delete(*, conversation: Conversation) -> None:
    """The owner no longer sees it; its requests stay, counted once, for the admin and analytics."""
    Conversation.objects.filter(pk=conversation.pk, deleted_at__isnull=True).update(deleted_at=timezone.now())


def request_resend(
    *, source: ResponseRequest, owner: User, client_request_id: str, input: Any | None = None
) -> tuple[ResponseRequest, bool]:
    """Regenerate (same prompt) or edit-and-resend (`input`): a new logical request at the end of
    the same conversation, chained to the answer before `source`, as if `source` had not been."""
    from django.conf import settings

    from .tools import tool_definitions

    conversation = source.conversation
    previous = (ResponseRequest.objects
                .filter(conversation=conversation, created__lt=source.created, status=Status.COMPLETED)
                .exclude(response_id="").order_by("-created").values_list("response_id", flat=True).first())
    old = source.params or {}
    params: dict[str, Any] = {
        "background": old.get("background", settings.RELAY_BACKGROUND_DEFAULT),
        "metadata": old.get("metadata") or {},
        "tools": tool_definitions(),
    }
    if previous:
        params["previous_response_id"] = previous
    return request_create(owner=owner, input=source.input if input is None else input, model=source.model,
                          client_request_id=client_request_id, conversation=conversation, params=params)

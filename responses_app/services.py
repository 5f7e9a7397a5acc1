"""Writes. Every state change of a request goes through here; status transitions are guarded in
the database (conditional UPDATEs), so two runners, tabs or retries cannot both win."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, Literal

from django.contrib.auth.models import User
from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.db.models import Case, F, PositiveIntegerField, Q, When
from django.utils import timezone

from . import branches, search, selectors, signals, storage
from .forms import unstorable
from .markdown import plain_text
from .models import (
    Checkpoint,
    Conversation,
    EventRecord,
    McpApproval,
    ResponseRequest,
    SafetyVerdict,
    Segment,
    ToolCall,
)
from .ops import metrics
from .upstream.credentials import masked

Status = ResponseRequest.Status
# A runner's lease on its request: renewed every keepers.LEASE_RENEW_S by its process. A runner that
# died is taken over by a sweep (relay/worker.py, timed to the earliest lease's end) once its lease
# has run out: the stream flows again within LEASE_SECONDS (12 s) and a moment.
LEASE_SECONDS = 12
# A request whose runners keep crashing (a row the database refuses, a bug) is not taken over for
# ever: the runner that crashes after this many takeovers (or takes it over once more) ends it
# `failed` with RELAY_CRASHED, which frees its user's concurrent slot.
MAX_TAKEOVERS = 3
RELAY_CRASHED = "relay_crashed"


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
    parent_id: uuid.UUID | None | Literal["leaf"] = "leaf",
    provider: str = "",
    continues: ResponseRequest | None = None,
) -> tuple[ResponseRequest, bool]:
    """Create the logical request, or return the one this idempotency key already made. In a
    conversation it follows `parent_id` (by default the branch shown) and becomes the leaf."""
    existing = selectors.request_by_client_id(owner=owner, client_request_id=client_request_id)
    if existing is not None:
        return existing, False
    if parent_id == "leaf":
        parent_id = branches.chosen_leaf_id(conversation.pk) if conversation is not None else None
    try:
        with transaction.atomic():
            request = ResponseRequest.objects.create(
                owner=owner, conversation=conversation, parent_id=parent_id, client_request_id=client_request_id,
                model=model, input=input, params=params or {}, provider=provider, continues=continues,
            )
    except IntegrityError:  # a concurrent submit with the same key won the race
        winner = selectors.request_by_client_id(owner=owner, client_request_id=client_request_id)
        assert winner is not None
        return winner, False
    if conversation is not None:
        updates: dict[str, Any] = {"updated": request.created, "leaf": request}
        if not conversation.title:
            updates["title"] = _title_from(request.prompt_text)
        Conversation.objects.filter(pk=conversation.pk).update(**updates)
        conversation.leaf_id = request.pk
    search.index([request.pk])
    return request, True


def request_acquire_lease(*, request_id: uuid.UUID, token: uuid.UUID, now: datetime | None = None) -> bool:
    """Single-flight: take the request for one runner. True only for the one that wins. Taking
    over a streaming request whose runner died (its lease ran out) counts in `takeovers`; one a
    stopping runner handed over (request_release_lease: no token) does not."""
    now = now or timezone.now()
    won = ResponseRequest.objects.filter(
        Q(status=Status.PENDING) | Q(status=Status.STREAMING, lease_expires__lt=now), pk=request_id
    ).update(status=Status.STREAMING, runner_token=token, lease_expires=now + timedelta(seconds=LEASE_SECONDS),
             takeovers=Case(When(status=Status.STREAMING, runner_token__isnull=False, then=F("takeovers") + 1),
                            default=F("takeovers"),
                            output_field=PositiveIntegerField()))
    return won == 1


def request_crashed(*, request_id: uuid.UUID, token: uuid.UUID, reason: str, at: datetime) -> bool:
    """The runner holding the request crashed and could not end it. Past MAX_TAKEOVERS it ends
    `failed` (RELAY_CRASHED, `reason`) here, writing no field of the provider's: True. Else its
    lease ends now, for the next sweep to take it over: False."""
    held = ResponseRequest.objects.filter(pk=request_id, status=Status.STREAMING, runner_token=token)
    created = held.values_list("created", flat=True).first()
    if created is None:
        return False  # ended, or another runner holds it
    ended = held.filter(takeovers__gte=MAX_TAKEOVERS).update(
        status=Status.FAILED, error_code=RELAY_CRASHED, error_message=masked(reason), terminal_at=at,
        duration_ms=max(0, int((at - created).total_seconds() * 1000)), lease_expires=None)
    if not ended:
        held.update(lease_expires=at)
        return False
    request = ResponseRequest.objects.get(pk=request_id)
    metrics.request_ended(status=Status.FAILED, model=request.model, duration_s=(at - created).total_seconds())
    signals.send(signals.request_finished, request=request, status=Status.FAILED, usage=None)
    return True


def request_release_lease(*, request_id: uuid.UUID, token: uuid.UUID) -> bool:
    """A stopping runner gives its request up: the lease ends now, so another runner can take it
    at once (it must have committed what it applied first). False when it no longer held it."""
    released = ResponseRequest.objects.filter(pk=request_id, status=Status.STREAMING, runner_token=token).update(
        runner_token=None, lease_expires=timezone.now() - timedelta(seconds=1))
    return released == 1


_TABLE = f'"{ResponseRequest._meta.db_table}"'
_PK = ResponseRequest._meta.pk.column if ResponseRequest._meta.pk else "id"
_HELD_PAIRS = f"({_TABLE}.\"{_PK}\", {_TABLE}.runner_token) IN (SELECT * FROM unnest(%s::uuid[], %s::uuid[]))"
_LISTED = f"{_TABLE}.\"{_PK}\" = ANY(%s::uuid[])"


def leases_renew(*, leases: list[tuple[uuid.UUID, uuid.UUID]], renew: bool = True) -> dict[uuid.UUID, str]:
    """Extend the leases of every runner in a process at once (unless `renew` is false: a read
    only). Returns what happened meanwhile to some of them: "cancelled" (Stop pressed elsewhere)
    or "lost" (another runner holds it now: this one's lease ran out, a database blip outlasting
    it, and a sweep took the request over; this one must stop without writing)."""
    news: dict[uuid.UUID, str] = {}
    for start in range(0, len(leases), 500):
        chunk = dict(leases[start:start + 500])
        streaming = ResponseRequest.objects.filter(status=Status.STREAMING)
        if connection.vendor == "postgresql":
            # One query text whatever the number of runners (arrays, not a parameter a runner):
            # psycopg caches the texts of queries of up to 50 parameters, and a text per count
            # grew that cache with the streams (bench/README.md, storage).
            ids, tokens = list(chunk), list(chunk.values())
            held = streaming.extra(where=[_HELD_PAIRS], params=[ids, tokens])
            listed = ResponseRequest.objects.extra(where=[_LISTED], params=[ids])
        else:
            pairs = Q()
            for request_id, token in chunk.items():
                pairs |= Q(pk=request_id, runner_token=token)
            held = streaming.filter(pairs)
            listed = ResponseRequest.objects.filter(pk__in=list(chunk))
        if renew:
            held.update(lease_expires=timezone.now() + timedelta(seconds=LEASE_SECONDS))
        rows = listed.values_list("pk", "status", "runner_token", "cancel_requested")
        for pk, status, holder, cancel_requested in rows:
            if status == Status.STREAMING and holder != chunk[pk]:
                news[pk] = "lost"
            elif cancel_requested:
                news[pk] = "cancelled"
    return news


def request_set_response_id(*, request_id: uuid.UUID, response_id: str, at: datetime) -> None:
    """Stored the moment response.created arrives, before anything else can go wrong."""
    ResponseRequest.objects.filter(pk=request_id).update(response_id=response_id)
    if ResponseRequest.objects.filter(pk=request_id, upstream_created_at__isnull=True).update(upstream_created_at=at):
        _observe_first(request_id, "upstream_created_at", at)


def request_mark_first(*, request_id: uuid.UUID, field: str, at: datetime) -> None:
    if field not in ("first_text_at", "first_tool_at"):
        raise ValueError(field)
    if ResponseRequest.objects.filter(pk=request_id, **{f"{field}__isnull": True}).update(**{field: at}):
        _observe_first(request_id, field, at)


def _observe_first(request_id: uuid.UUID, field: str, at: datetime) -> None:
    """Once per logical request and field: the conditional UPDATE before this succeeds once."""
    created = ResponseRequest.objects.filter(pk=request_id).values_list("created", flat=True).first()
    if created is not None:
        metrics.request_reached(field, (at - created).total_seconds())


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
    tool_text: str = "",
    counters: dict[str, int] | None = None,
    response_id: str = "",
) -> bool:
    """The one place a request becomes terminal (or unknown). Guarded by the runner's lease token."""
    if status not in ResponseRequest.ENDED:
        raise TransitionError(f"{status!r} is not an outcome")
    query = ResponseRequest.objects.filter(pk=request_id, status__in=[Status.STREAMING, Status.PENDING])
    if token is not None:
        query = query.filter(runner_token=token)
    request = ResponseRequest.objects.only("created", "model").get(pk=request_id)
    fields: dict[str, Any] = {
        "status": status,
        "terminal_at": at,
        "duration_ms": max(0, int((at - request.created).total_seconds() * 1000)),
        "error_code": masked(error_code or "", 100),
        "error_message": masked(error_message or ""),  # it may quote the upstream: never a key
        "incomplete_reason": (incomplete_reason or "")[:100],
        "usage": usage,
        "final_text": final_text,
        "tool_text": tool_text,
        "lease_expires": None,
        **(counters or {}),
    }
    if response_id:
        fields["response_id"] = response_id
    updated = query.update(**fields) == 1
    if updated:  # counted here, once: a second runner's or a reconcile's update changes no row
        search.index([request_id])  # the answer searchable, indexed once as it ends
        metrics.request_ended(status=status, model=request.model, duration_s=(at - request.created).total_seconds())
        signals.send(signals.request_finished, request=ResponseRequest.objects.get(pk=request_id), status=status,
                     usage=usage)
    if updated and response_id and status == Status.COMPLETED:
        Conversation.objects.filter(requests__pk=request_id).update(last_response_id=response_id, updated=at)
    return updated


def conversation_chain_broken(*, request_id: uuid.UUID) -> None:
    """The upstream forgot the conversation's last response: the next turn must not chain to it
    (request_submit then sends the whole conversation). The chain is repaired by the next
    completed turn (request_mark_terminal)."""
    Conversation.objects.filter(requests__pk=request_id).update(last_response_id="")


def request_cancel(*, request: ResponseRequest) -> bool:
    """The explicit Stop. Pending requests end at once; streaming ones are told to stop. Counted
    once per request in `cancels`, however many tabs, API calls or no-JS forms asked: only the
    call that changes the request counts. True while a cancel is in effect."""
    now = timezone.now()
    if ResponseRequest.objects.filter(pk=request.pk, status=Status.PENDING).update(
        status=Status.CANCELLED, cancel_requested=True, terminal_at=now, cancels=F("cancels") + 1
    ):
        metrics.CANCELS.inc()
        metrics.request_ended(status=Status.CANCELLED, model=request.model,
                              duration_s=(now - request.created).total_seconds())
        signals.send(signals.request_finished, request=ResponseRequest.objects.get(pk=request.pk),
                     status=Status.CANCELLED, usage=None)
        return True
    streaming = ResponseRequest.objects.filter(pk=request.pk, status=Status.STREAMING)
    if streaming.filter(cancel_requested=False).update(cancel_requested=True, cancels=F("cancels") + 1):
        metrics.CANCELS.inc()
        return True
    return streaming.filter(cancel_requested=True).exists()


def request_count(*, request_id: uuid.UUID, **increments: int) -> None:
    """Add to counters (viewer_connections, reconnects, disconnects, retries ...)."""
    if increments:
        if ResponseRequest.objects.filter(pk=request_id).update(**{k: F(k) + v for k, v in increments.items()}):
            metrics.row_counted(increments)


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
    fields: dict[str, Any] = {"outcome": masked(outcome, 32), "events": events, "ended_at": timezone.now(),
                              "detail": masked(detail)}
    if response_id:
        fields["response_id"] = response_id
    if http_status is not None:
        fields["http_status"] = http_status
    Segment.objects.filter(pk=segment_id).update(**fields)


def checkpoints_commit_many(
    *, items: list[tuple[uuid.UUID, list[dict[str, Any]], list[dict[str, Any]]]]
) -> dict[uuid.UUID, Exception]:
    """Several requests' checkpoint rows (sealed: JSON serialised, streaming/checkpoints.py) and
    event batches: one transaction, two bulk INSERTs (storage.insert_rows). Event batches are
    stored compressed (models.EventRecord).

    Returns the requests whose rows the database refused, with the error; every other request's
    rows are committed. A round first tries all rows at once in one plain transaction (four
    statements with BEGIN and COMMIT: most rounds); if that fails for a reason other than the
    connection, it is rolled back and done again with each request in a savepoint of its own and
    the foreign keys checked at once, so one bad row never drops another request's checkpoint or
    events. A connection error (the database went away) raises: nothing was committed, and the
    caller retries the whole round."""
    now = timezone.now()

    def insert(chosen: list[tuple[uuid.UUID, list[dict[str, Any]], list[dict[str, Any]]]]) -> None:
        with transaction.atomic():
            # compressed here, on the writer's database thread (zstd releases the GIL meanwhile)
            storage.insert_rows(EventRecord, [
                dict(b, data="", compressed=storage.log_compress(b["data"]), request_id=rid, created=now)
                for rid, _rows, batches in chosen for b in batches])
            storage.insert_rows(Checkpoint, [dict(row, request_id=rid, created=now)
                                             for rid, rows, _b in chosen for row in rows], json=CHECKPOINT_JSON)

    def all_at_once() -> bool:
        try:
            insert(items)
            return True
        except (OperationalError, InterfaceError):
            raise
        except Exception:  # one request's row, most likely: find which
            return False

    failed: dict[uuid.UUID, Exception] = {}
    nested = connection.in_atomic_block  # called inside a transaction: savepoints only
    # The common round: BEGIN, two INSERTs, COMMIT. A row the database refuses, now or at COMMIT
    # (Django's foreign keys are DEFERRABLE INITIALLY DEFERRED: a row of a request deleted
    # meanwhile fails there), rolls the whole round back, and it is done again below, each
    # request on its own.
    if not nested and all_at_once():
        return failed
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # Foreign keys checked at each INSERT, inside its request's savepoint, not at COMMIT
            # where one bad row would take every request's rows with it.
            with connection.cursor() as cursor:
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        if nested and all_at_once():
            return failed
        for item in items:
            try:
                insert([item])
            except (OperationalError, InterfaceError):
                raise
            except Exception as exc:
                failed[item[0]] = exc
    return failed


# A checkpoint row's columns that hold serialised JSON (streaming/checkpoints.CheckpointRow.seal).
CHECKPOINT_JSON = frozenset({"view", "ops", "snapshot"})


def tool_call_claim(*, request_id: uuid.UUID, call_id: str, name: str, arguments: Any) -> ToolCall | None:
    """Claim a call id of this request for execution; None when it was claimed before (it ran, or
    is running). Another request's call with the same id is another row."""
    try:
        with transaction.atomic():
            return ToolCall.objects.create(request_id=request_id, call_id=call_id, name=name, arguments=arguments)
    except IntegrityError:
        return None


def tool_call_finish(*, request_id: uuid.UUID, call_id: str, output: str, ok: bool) -> None:
    """Store the output of this request's call."""
    ToolCall.objects.filter(request_id=request_id, call_id=call_id).update(
        output=output, status=ToolCall.Status.DONE if ok else ToolCall.Status.FAILED, finished_at=timezone.now())


def safety_verdicts_record(*, request_id: uuid.UUID, verdicts: list[dict[str, Any]]) -> None:
    """Store checks of the safety policy (dicts of SafetyVerdict's fields), in the order made."""
    SafetyVerdict.objects.bulk_create([SafetyVerdict(request_id=request_id, **fields) for fields in verdicts])
    for fields in verdicts:  # counted once stored, in the one place every verdict passes
        metrics.safety_verdict(fields["mode"], "error" if fields.get("error") else (
            "flagged" if fields["flagged"] else "passed"))


def mcp_approval_decide(*, request: ResponseRequest, approval_request_id: str, approve: bool,
                        user: User) -> bool:
    """Store a person's answer to an MCP approval request; False when it was answered before."""
    try:
        with transaction.atomic():
            McpApproval.objects.create(request=request, approval_request_id=approval_request_id, approve=approve,
                                       decided_by=user)
    except IntegrityError:
        return False
    return True


def _title_from(prompt: str) -> str:
    # Derived for display (the prompt itself is kept whole): its words without Markdown's markers,
    # no NUL or lone surrogate in a varchar.
    line = " ".join(prompt.replace("\x00", " ").encode("utf-8", "replace").decode().split())
    line = " ".join(plain_text(line).split()) or line
    return line if len(line) <= 60 else line[:57].rstrip() + "..."


# --- conversation actions -----------------------------------------------------------------------

def conversation_rename(*, conversation: Conversation, title: str) -> str:
    title = " ".join(title.split())[:200]
    if not title:
        raise ValueError("A title cannot be empty.")
    if unstorable(title):
        raise ValueError("A title cannot contain U+0000 or a lone surrogate.")
    Conversation.objects.filter(pk=conversation.pk).update(title=title)
    search.index(ResponseRequest.objects.filter(conversation=conversation, parent__isnull=True))
    conversation.title = title
    return title


def conversation_delete(*, conversation: Conversation) -> list[ResponseRequest]:
    """The owner no longer sees it; its requests stay, counted once, for the admin and analytics.
    Its requests in flight are stopped (returned, for their runners to be told)."""
    Conversation.objects.filter(pk=conversation.pk, deleted_at__isnull=True).update(deleted_at=timezone.now())
    live = list(ResponseRequest.objects.filter(conversation=conversation,
                                               status__in=[Status.PENDING, Status.STREAMING]))
    for request in live:
        request_cancel(request=request)
    return live


def conversation_for_thread(*, user: User, thread_id: str) -> Conversation | None:
    """The conversation a front end's thread names (an AG-UI `threadId`, an AI SDK chat id):
    a UUID is the conversation's own id, any other string maps to one conversation of this user;
    made on first use. None when it is another user's conversation, or a deleted one."""
    pk = selectors.thread_conversation_id(user=user, thread_id=thread_id)
    conversation, _ = Conversation.objects.get_or_create(pk=pk, defaults={"owner": user})
    if not selectors.is_owner(user, conversation) or conversation.deleted_at is not None:
        return None
    return conversation

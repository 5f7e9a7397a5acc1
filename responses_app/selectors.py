"""Reads. Access rules live here: a request is visible to its owner and to users with the
view_responserequest permission (cancelled by those with change_responserequest), nobody else."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from . import attachments, branches, pricing, storage
from .conf import app_settings
from .models import (
    Checkpoint,
    Conversation,
    EventRecord,
    McpApproval,
    ResponseRequest,
    SafetyVerdict,
    Segment,
    Share,
    ToolCall,
)
from .streaming.view import apply_op
from .streaming.vocabulary import INPUT_FLAGGED

VIEW_PERMISSION = "responses_app.view_responserequest"
CHANGE_PERMISSION = "responses_app.change_responserequest"


def is_owner(user: Any, owned: Any) -> bool:
    """The one owner check: `owned` (a request, a conversation) is the signed-in user's own."""
    return bool(user is not None and user.is_authenticated and owned.owner_id == user.pk)


def can_view(user: Any, request: ResponseRequest) -> bool:
    """The owner, or a user with the view_responserequest permission (superusers have every one)."""
    return is_owner(user, request) or bool(user.is_authenticated and user.has_perm(VIEW_PERMISSION))


def can_cancel(user: Any, request: ResponseRequest) -> bool:
    """The owner, or a user with the change_responserequest permission."""
    return is_owner(user, request) or bool(user.is_authenticated and user.has_perm(CHANGE_PERMISSION))


def can_read_withheld(user: Any) -> bool:
    """Text the safety policy withheld or retracted (the raw event log, the verdicts' windows)."""
    return bool(user.is_authenticated and user.has_perm("responses_app.view_safetyverdict"))


WITHHOLDING = (SafetyVerdict.Action.WITHHELD, SafetyVerdict.Action.RETRACTED, SafetyVerdict.Action.INPUT_BLOCKED)


def request_has_withheld_text(*, request_id: uuid.UUID) -> bool:
    """The safety policy withheld, retracted or blocked text of this request: then its text, tool
    data and raw event log are for `can_read_withheld` only, wherever they are shown."""
    return SafetyVerdict.objects.filter(request_id=request_id, action__in=WITHHOLDING).exists()


def parse_id(value: Any) -> uuid.UUID | None:
    """An id as a client sends it (a path, a form field, a JSON value, a frame): the UUID it
    spells, or None for anything else (a malformed id names nothing: "not found", never a 500)."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def request_get_for_user(
    *, user: User | AnonymousUser, request_id: uuid.UUID | str
) -> ResponseRequest | None:
    pk = parse_id(request_id)
    if pk is None or not user.is_authenticated:
        return None
    request = ResponseRequest.objects.select_related("conversation").filter(pk=pk).first()
    return request if request is not None and can_view(user, request) else None


# --- share links ------------------------------------------------------------------------------------

def share_open(*, token: str | None, user: User | AnonymousUser) -> Share | None:
    """The one rule of a share link, for its pages and its sockets: not revoked, its conversation
    not deleted, and the visitor signed in, unless the owner chose "anyone with the link" and
    RELAY_SHARE_ANONYMOUS allows it."""
    if not token or "\x00" in token:  # no token has one (and PostgreSQL refuses it in a query)
        return None
    share = (Share.objects.select_related("conversation")
             .filter(token=token, revoked_at__isnull=True, conversation__deleted_at__isnull=True).first())
    if share is None or not (user.is_authenticated or (share.anonymous and app_settings.SHARE_ANONYMOUS)):
        return None
    return share


def request_for_viewer(*, user: User | AnonymousUser, request_id: uuid.UUID | str,
                       share: str | None = None) -> ResponseRequest | None:
    """Who may follow a request (the request socket, the shared pages): its owner and staff, or,
    through a share link (`share`: its token), anyone it admits, to its one turn or to any turn of
    its conversation. A viewer, never a request of theirs: they can neither stop nor add."""
    if share is None:
        return request_get_for_user(user=user, request_id=request_id)
    grant = share_open(token=share, user=user)
    pk = parse_id(request_id)
    if grant is None or pk is None:
        return None
    request = ResponseRequest.objects.select_related("conversation").filter(
        pk=pk, conversation_id=grant.conversation_id).first()
    if request is None:
        return None
    return request if grant.request_id in (None, request.pk) or grant.request_id in _continued(request) else None


def _continued(request: ResponseRequest) -> set[uuid.UUID]:
    """The turns a continuation goes on from (Continue, continuing.py): a share of the turn shows them all."""
    found: set[uuid.UUID] = set()
    node: ResponseRequest | None = request
    while node is not None and node.continues_id is not None and node.continues_id not in found:
        found.add(node.continues_id)
        node = ResponseRequest.objects.only("pk", "continues_id").filter(pk=node.continues_id).first()
    return found


def conversation_for_viewer(*, user: User | AnonymousUser | None, conversation_id: uuid.UUID | str,
                            share: str | None = None) -> Conversation | None:
    """Who may follow a conversation's turns (its socket): its owner and staff, or anyone a share
    link of the whole conversation admits. Deleted ones too (the socket says so)."""
    if user is None:
        return None
    if share is None:
        return conversation_get_for_user(user=user, conversation_id=conversation_id) if user.is_authenticated else None  # type: ignore[arg-type]
    grant = share_open(token=share, user=user)
    if grant is None or grant.request_id is not None or grant.conversation_id != parse_id(conversation_id):
        return None
    return grant.conversation


def _view_from(rows: list[tuple[int, int | None, Any, Any]]) -> dict[str, Any] | None:
    """The view at the last of a request's checkpoint rows (revision, base revision, view, ops),
    in revision order from a base: the base's view with each row's ops applied. A row that does
    not continue the one before (never written so) ends it: the view is the last consistent one."""
    view: dict[str, Any] | None = None
    for revision, base_revision, whole, ops in rows:
        if base_revision is None and whole is not None:  # copied as deep as ops write
            view = dict(whole, meta=dict(whole.get("meta") or {}), blocks=[dict(b) for b in whole.get("blocks") or ()])
        elif view is not None and base_revision == view.get("revision") and ops is not None:
            for op in ops:
                apply_op(view, op)
            view["revision"] = revision
        else:
            break
    return view


def _checkpoint_rows_from_base(request_ids: list[Any]) -> dict[Any, list[tuple[int, int | None, Any, Any]]]:
    """Each request's checkpoint rows from its latest base on, in revision order (two queries:
    the bases' revisions, then each request's range of its index `checkpoint_latest`)."""
    bases = dict(Checkpoint.objects.filter(request_id__in=request_ids, base_revision__isnull=True, view__isnull=False)
                 .values("request_id").annotate(base=Max("revision")).values_list("request_id", "base"))
    if not bases:
        return {}
    ranges = Q()
    for request_id, base in bases.items():
        ranges |= Q(request_id=request_id, revision__gte=base)
    rows = Checkpoint.objects.filter(ranges).order_by("request_id", "revision").values_list(
        "request_id", "revision", "base_revision", "view", "ops")
    chains: dict[Any, list[tuple[int, int | None, Any, Any]]] = {}
    for request_id, *row in rows:
        chains.setdefault(request_id, []).append(tuple(row))  # type: ignore[arg-type]
    return chains


def views_latest(*, request_ids: list[Any]) -> dict[Any, dict[str, Any]]:
    """The latest committed view of each request that has a checkpoint, materialised."""
    views = {}
    for request_id, rows in _checkpoint_rows_from_base(request_ids).items():
        view = _view_from(rows)
        if view is not None:
            views[request_id] = view
    return views


def view_latest(*, request: ResponseRequest) -> dict[str, Any]:
    """The latest committed view, or an empty one that carries the request's status."""
    view = views_latest(request_ids=[request.pk]).get(request.pk)
    return view if view is not None else empty_view(request)


def empty_view(request: ResponseRequest) -> dict[str, Any]:
    """A new one each time: followers apply patches to the view they are given."""
    return {"revision": 0, "meta": {"response_id": request.response_id or None, "status": None}, "blocks": []}


def request_by_client_id(*, owner: User, client_request_id: str) -> ResponseRequest | None:
    """The idempotency lookup: a resubmitted form or retried call finds its logical request."""
    return ResponseRequest.objects.filter(owner=owner, client_request_id=client_request_id).first()


def requests_to_take_over(*, now: datetime | None = None, pending_after_s: int = 10
                          ) -> list[tuple[uuid.UUID, str, datetime | None]]:
    """Streaming requests whose runner died (lease expired), and pending ones nobody started:
    (id, status, lease expiry)."""
    now = now or timezone.now()
    stale = Q(status=ResponseRequest.Status.STREAMING, lease_expires__lt=now) | Q(
        status=ResponseRequest.Status.PENDING, created__lt=now - timedelta(seconds=pending_after_s))
    return list(ResponseRequest.objects.filter(stale).order_by("created").values_list(
        "pk", "status", "lease_expires")[:1000])


def next_lease_expiry(*, now: datetime | None = None) -> datetime | None:
    """The earliest lease of a streaming request still to run out (the sweep's next due time)."""
    now = now or timezone.now()
    return ResponseRequest.objects.filter(status=ResponseRequest.Status.STREAMING, lease_expires__gte=now) \
        .order_by("lease_expires").values_list("lease_expires", flat=True).first()


def requests_pending_recent(*, within_s: int) -> list[uuid.UUID]:
    """Pending requests created in the last `within_s` seconds (the runners' watch, worker.py)."""
    since = timezone.now() - timedelta(seconds=within_s)
    return list(ResponseRequest.objects.filter(status=ResponseRequest.Status.PENDING, created__gte=since)
                .order_by("created").values_list("pk", flat=True)[:100])


def request_status(*, request_id: uuid.UUID | str) -> str:
    return ResponseRequest.objects.filter(pk=request_id).values_list("status", flat=True).get()


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What a runner needs of its request, held for the whole stream: these columns only, not a
    model instance with every column and its state (bench/README.md, storage: memory per stream).
    The same attribute names as ResponseRequest's, so bodies and checks take either."""

    pk: uuid.UUID
    model: str
    input: Any
    params: Any
    response_id: str
    created: datetime
    conversation_id: uuid.UUID | None
    provider: str = ""
    takeovers: int = 0

    FIELDS = ("pk", "model", "input", "params", "response_id", "created", "conversation_id", "provider", "takeovers")


def provider_of_response(*, response_id: str) -> str | None:
    """The provider a response was made by (a request's `provider`), or None: no request has it."""
    return ResponseRequest.objects.filter(response_id=response_id).values_list("provider", flat=True).first()


def request_get(*, request_id: uuid.UUID) -> RunRequest:
    """The request as its runner holds it: its input as the provider is sent it (with its
    attachments' parts, attachments.upstream_input)."""
    row = ResponseRequest.objects.values(*RunRequest.FIELDS).get(pk=request_id)
    row["input"] = attachments.upstream_input(row["input"], row["params"])
    return RunRequest(**row)


def segment_count(*, request_id: uuid.UUID) -> int:
    return Segment.objects.filter(request_id=request_id).count()


def posts_refused(*, request_id: uuid.UUID) -> int:
    """How many POSTs the upstream refused with a 429 when every segment so far was one (0
    otherwise): it accepted none of them, so sending the request again bills nothing twice."""
    rows = list(Segment.objects.filter(request_id=request_id).values_list("kind", "http_status", "ended_at"))
    refused = all(kind == Segment.Kind.INITIAL and status == 429 and ended for kind, status, ended in rows)
    return len(rows) if refused else 0


def safety_precheck(*, request_id: uuid.UUID) -> SafetyVerdict | None:
    """The input check a logical request already had (a takeover does not check it again)."""
    return SafetyVerdict.objects.filter(request_id=request_id, kind=SafetyVerdict.Kind.INPUT,
                                        mode="precheck").order_by("-id").first()


def checkpoint_latest_revision(*, request_id: uuid.UUID) -> int | None:
    return Checkpoint.objects.filter(request_id=request_id).order_by("-revision").values_list(
        "revision", flat=True).first()


def checkpoint_latest(*, request_id: uuid.UUID) -> tuple[int, str] | None:
    """The latest checkpoint's revision and reason (a runner that takes over goes on from it)."""
    return Checkpoint.objects.filter(request_id=request_id).order_by("-revision").values_list(
        "revision", "reason").first()


def safety_passed(*, request_id: uuid.UUID) -> dict[tuple[str, str], int]:
    """(block id, kind) → how far its text passed the safety checks, without a hole: a runner
    that takes the request over does not judge that text again."""
    passed: dict[tuple[str, str], int] = {}
    rows = SafetyVerdict.objects.filter(request_id=request_id).exclude(kind=SafetyVerdict.Kind.INPUT).order_by(
        "start").values_list("block_id", "kind", "start", "end", "action")
    for block_id, kind, start, end, action in rows:
        key = (block_id, kind)
        if action == SafetyVerdict.Action.PASSED and start <= passed.get(key, 0):
            passed[key] = max(passed.get(key, 0), end)
    return passed


def event_log_by_round(*, request_id: uuid.UUID) -> list[tuple[int, bytes]]:
    """The raw event log in order, each batch with its response round: every continuation after
    tool results is a new upstream response, counted by the continuation segments before it."""
    kinds = list(Segment.objects.filter(request_id=request_id).order_by("index").values_list("kind", flat=True))
    batches = event_batches(request_id=request_id).values_list("segment_index", "data", "compressed")
    return [(kinds[: segment_index + 1].count(Segment.Kind.CONTINUATION), storage.log_bytes(data, compressed))
            for segment_index, data, compressed in batches]


def event_batches(*, request_id: uuid.UUID) -> QuerySet[EventRecord]:
    return EventRecord.objects.filter(request_id=request_id).order_by("id")


def event_log_text(*, request_id: uuid.UUID) -> str:
    """The whole raw event log as SSE text, as `manage.py replay` reads it."""
    return "".join(storage.log_text(data, compressed)
                   for data, compressed in event_batches(request_id=request_id).values_list("data", "compressed"))


def conversations_for_user(*, user: User) -> QuerySet[Conversation]:
    return Conversation.objects.filter(owner=user).order_by("-updated")


def conversation_get_for_user(*, user: User, conversation_id: uuid.UUID | str) -> Conversation | None:
    pk = parse_id(conversation_id)
    conversation = Conversation.objects.filter(pk=pk).first() if pk is not None else None
    if conversation is None:
        return None
    if not is_owner(user, conversation) and not user.has_perm(VIEW_PERMISSION):
        return None
    return conversation


def conversation_context(*, request: ResponseRequest | RunRequest) -> list[dict[str, Any]]:
    """The turns before the request on its branch, as Responses input items: each turn's input,
    its function calls with their outputs, and the answer shown. For when the upstream no longer
    has the chain (`previous_response_not_found`), or never had it (branches.branch_head)."""
    if request.conversation_id is None:
        return []
    chain = branches.ancestors(conversation_id=request.conversation_id, request_id=request.pk)
    # A turn the precheck flagged was never sent, and never is: not in any context either.
    by_pk = ResponseRequest.objects.filter(pk__in=chain).exclude(error_code=INPUT_FLAGGED).in_bulk()
    earlier = [by_pk[pk] for pk in chain if pk in by_pk]
    calls: dict[uuid.UUID, list[ToolCall]] = {}
    for call in ToolCall.objects.filter(request__in=earlier).order_by("started_at"):
        calls.setdefault(call.request_id, []).append(call)
    items: list[dict[str, Any]] = []
    for turn in earlier:
        sent = attachments.upstream_input(turn.input, turn.params)
        items.extend(sent if isinstance(sent, list) else [{"role": "user", "content": sent}])
        for call in calls.get(turn.pk, []):
            arguments = call.arguments if isinstance(call.arguments, str) else orjson.dumps(call.arguments).decode()
            items.append({"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": arguments})
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": call.output})
        if turn.final_text:
            items.append({"role": "assistant", "content": turn.final_text})
    return items


def mcp_approvals(*, request_id: uuid.UUID) -> dict[str, bool]:
    """The answers given so far to a request's MCP approval requests, by approval request id."""
    return dict(McpApproval.objects.filter(request_id=request_id).values_list("approval_request_id", "approve"))


def tool_call_output(*, request_id: uuid.UUID, call_id: str) -> str | None:
    """The stored output of this request's call `call_id` (None when it never ran here, or has not
    finished: it may still run, or its runner died while it ran)."""
    return ToolCall.objects.filter(request_id=request_id, call_id=call_id).exclude(
        status=ToolCall.Status.RUNNING).values_list("output", flat=True).first()
# --- conversations as their owner sees them -------------------------------------------------------

def conversation_open_for_user(*, user: User | AnonymousUser, conversation_id: uuid.UUID | str) -> Conversation | None:
    """A conversation its owner (or staff) may open: not deleted."""
    if not user.is_authenticated:
        return None
    conversation = conversation_get_for_user(user=user, conversation_id=conversation_id)  # type: ignore[arg-type]
    return conversation if conversation is not None and conversation.deleted_at is None else None


def conversation_turn_ids(*, conversation_id: uuid.UUID | str) -> list[str]:
    """The turns of the branch shown, first turn first."""
    return branches.chosen_path_ids(conversation_id)


def usage_totals(*, user: User) -> dict[str, Any]:
    """Tokens over every answer the user has had (deleted conversations too: they were used), and
    their cost (a pricing.Total) where the site set prices."""
    totals: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    cost = pricing.Total()
    rows = ResponseRequest.objects.filter(owner=user, usage__isnull=False).values_list("usage", "model")
    for usage, model in rows.iterator():
        if isinstance(usage, dict):
            for key in ("input_tokens", "output_tokens", "total_tokens"):
                totals[key] += int(usage.get(key) or 0)
            cost = pricing.total_of([(usage, model)], cost)
    totals["cost"] = cost if app_settings.PRICES else None
    return totals


def conversation_cost(*, conversation_id: uuid.UUID | str) -> pricing.Total | None:
    """What the conversation's answers cost, every version of every turn (each was paid for);
    None where the site set no prices."""
    if not app_settings.PRICES:
        return None
    return pricing.total_of(ResponseRequest.objects.filter(conversation_id=conversation_id, usage__isnull=False)
                            .values_list("usage", "model"))


# A thread id that is not a UUID (a front end's own chat or thread id) names one conversation per user.
THREAD_NAMESPACE = uuid.UUID("5b0f6c52-4a3e-4f0b-9d55-7e1f0c6a2b91")


def thread_conversation_id(*, user: User | AnonymousUser, thread_id: str) -> uuid.UUID:
    """The conversation id a front end's thread id names: itself when it is a UUID."""
    try:
        return uuid.UUID(thread_id)
    except ValueError:
        return uuid.uuid5(THREAD_NAMESPACE, f"{user.pk}:{thread_id}")


def request_in_flight_for_user(*, user: User | AnonymousUser, key: str) -> ResponseRequest | None:
    """What a front end's resume route names: a request by its id, or a conversation (a thread or
    chat id) by its newest request; only while it is pending or streaming, only for whom may view it."""
    request = request_get_for_user(user=user, request_id=key)  # None for a chat id of the front end's own
    if request is None and user.is_authenticated:
        conversation_id = thread_conversation_id(user=user, thread_id=key)
        newest = ResponseRequest.objects.filter(conversation_id=conversation_id).order_by("-created").values_list(
            "pk", flat=True).first()
        request = request_get_for_user(user=user, request_id=newest) if newest else None
    if request is None or request.status not in (ResponseRequest.Status.PENDING, ResponseRequest.Status.STREAMING):
        return None
    return request

"""Persistence for the relay: one row per logical request, its upstream segments, committed
checkpoints, the raw event log (in batches) and tool calls. Writes go through services.py, reads
through selectors.py."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import F
from django.db.models.functions import MD5
from django.utils import timezone

from . import storage
from .fields import EqualityIndex, FastJSONField, SearchDocumentField, Utf8TextField
from .streaming import vocabulary as v
from .turn_settings import GenerationSettings, Preset  # noqa: F401 (a model of the app)


class Conversation(GenerationSettings):  # its settings: instructions, temperature ... (turn_settings.py)
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)
    # Chained into the next request as previous_response_id; cleared when the upstream forgets it.
    last_response_id = models.TextField(blank=True)
    # Deleted by its owner: gone from their pages, kept (with every request) for the admin and analytics.
    deleted_at = models.DateTimeField(null=True, blank=True)
    # The last turn of the branch every tab shows (branches.py); NULL: the newest turn.
    leaf = models.ForeignKey("ResponseRequest", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    # Pinned by its owner: first in the sidebar and the list. Archived: out of both, in the Archived view.
    pinned_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated"]
        indexes = [
            # the conversation list: a user's conversations, most recent first
            models.Index(fields=["owner", "-updated"], name="conv_owner_updated"),
        ]

    def __str__(self) -> str:
        return self.title or f"Conversation {str(self.id)[:8]}"


class ResponseRequest(models.Model):
    """One logical request: counted once, however many tabs, reconnects or segments it has."""

    class Status(models.TextChoices):  # the values are streaming/vocabulary.py's, spelled once there
        PENDING = v.PENDING
        STREAMING = v.STREAMING
        COMPLETED = v.COMPLETED
        FAILED = v.FAILED
        INCOMPLETE = v.INCOMPLETE
        ERROR = v.ERROR
        CANCELLED = v.CANCELLED
        UNKNOWN = v.UNKNOWN  # the stream was lost and reconciliation could not tell the outcome

    TERMINAL = v.TERMINAL_STATUSES
    ENDED = v.ENDED_STATUSES  # terminal, or unknown: nobody streams it any more

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="requests", null=True, blank=True
    )
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="response_requests")
    # The turn this one follows in its conversation (NULL: a first turn). Turns with one parent are
    # versions of one turn, oldest first: Regenerate and Edit add one (branches.py).
    parent = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children")
    # Continue: this request goes on with the answer of the one it follows (stopped or cut short),
    # shown as one answer with it (continuing.py); NULL: a turn of its own.
    continues = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True,
                                  related_name="continuations")
    client_request_id = models.CharField(max_length=100)
    model = models.CharField(max_length=100)
    # The RELAY_PROVIDERS name that serves `model`, chosen at submit; empty: the implicit provider.
    provider = models.CharField(max_length=64, blank=True, default="")
    input = FastJSONField()
    params = FastJSONField(default=dict, blank=True)  # metadata, background, previous_response_id ...
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    response_id = models.TextField(blank=True)
    error_code = models.TextField(blank=True)
    error_message = Utf8TextField(blank=True)
    incomplete_reason = models.TextField(blank=True)
    usage = models.JSONField(null=True, blank=True)  # from the terminal Response only, never summed
    final_text = Utf8TextField(blank=True)  # the answer's text, for listing and search
    tool_text = Utf8TextField(blank=True, default="")  # what its tool calls said, for search (search.py)
    # A turn copied, as text, from a shared conversation (shares.share_continue): the turn it copies.
    # Never sent and never billed; the analytics leave it out.
    copy_of = models.UUIDField(null=True, blank=True)

    # Single-flight: a runner owns the request while its lease is unexpired.
    runner_token = models.UUIDField(null=True, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Leases taken over after their runner died or crashed: bounded (services.MAX_TAKEOVERS)
    takeovers = models.PositiveIntegerField(default=0)

    created = models.DateTimeField(default=timezone.now)
    upstream_created_at = models.DateTimeField(null=True, blank=True)
    first_text_at = models.DateTimeField(null=True, blank=True)
    first_tool_at = models.DateTimeField(null=True, blank=True)
    terminal_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    events = models.PositiveIntegerField(default=0)
    duplicates = models.PositiveIntegerField(default=0)
    out_of_order = models.PositiveIntegerField(default=0)
    gaps = models.PositiveIntegerField(default=0)
    unknown_events = models.PositiveIntegerField(default=0)
    malformed_events = models.PositiveIntegerField(default=0)
    disconnects = models.PositiveIntegerField(default=0)
    retries = models.PositiveIntegerField(default=0)
    viewer_connections = models.PositiveIntegerField(default=0)
    reconnects = models.PositiveIntegerField(default=0)
    cancels = models.PositiveIntegerField(default=0)
    last_sequence_number = models.IntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            # Idempotency: a resubmitted form or retried API call finds the existing request.
            models.UniqueConstraint(fields=["owner", "client_request_id"], name="request_idempotency_key"),
        ]
        indexes = [
            # analytics: requests per day by status and model
            models.Index(fields=["created", "status"], name="request_created_status"),
            # a conversation's messages in order
            models.Index(fields=["conversation", "created"], name="request_conversation"),
            # recovery: streaming requests whose lease ran out
            models.Index(fields=["status", "lease_expires"], name="request_lease"),
            # a request by its provider's response id (the admin, an operator's query)
            EqualityIndex(fields=["response_id"], name="request_response_id"),
        ]

    def __str__(self) -> str:
        return f"{self.model} {self.status} {str(self.id)[:8]}"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def prompt_text(self) -> str:
        if isinstance(self.input, str):
            return self.input
        texts = []
        for item in self.input or []:
            if isinstance(item, dict) and isinstance(item.get("content"), str):
                texts.append(item["content"])
        return "\n".join(texts)

    def ms_since_created(self, moment: object) -> int | None:
        if moment is None:
            return None
        return int((moment - self.created).total_seconds() * 1000)  # type: ignore[operator]


class Segment(models.Model):
    """One upstream HTTP stream that served a request: the first POST, a resume, a continuation."""

    class Kind(models.TextChoices):
        INITIAL = "initial"
        RESUME = "resume"
        CONTINUATION = "continuation"  # a new response after tool results
        RECONCILE = "reconcile"  # a GET of the response after the stream was lost
        FULL_CONTEXT = "full_context"  # the chain was gone: the request again, with the whole conversation

    request = models.ForeignKey(ResponseRequest, on_delete=models.CASCADE, related_name="segments")
    index = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    response_id = models.TextField(blank=True)
    starting_after = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    # completed, failed, dropped, http_429 ...: ours, cut to 32 where it quotes anything (services.segment_end)
    outcome = models.CharField(max_length=32, blank=True)
    http_status = models.PositiveIntegerField(null=True, blank=True)
    events = models.PositiveIntegerField(default=0)
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["request", "index"]
        constraints = [models.UniqueConstraint(fields=["request", "index"], name="segment_order")]

    def __str__(self) -> str:
        return f"segment {self.index} ({self.kind}): {self.outcome or 'open'}"


class Checkpoint(models.Model):
    """A committed revision of the view. The newest by revision is what a (re)connecting tab sees.

    Stored linear in the answer: a runner's first checkpoint holds the whole `view` (a *base*,
    `base_revision` NULL); each later one holds only `ops`, the view ops (adjacent appends merged)
    that take the previous checkpoint's revision, `base_revision`, to this one. The view at any
    checkpoint is its latest base with the ops after it applied (selectors.view_latest). The
    Response `snapshot` is kept once per response, with the first checkpoint after it ended (or
    the request's terminal one): nothing reads it before the end, and recovery rebuilds from the
    event log. Rows of the old format (a full view and
    snapshot in every row) are bases."""

    request = models.ForeignKey(ResponseRequest, on_delete=models.CASCADE, related_name="checkpoints")
    revision = models.PositiveIntegerField()
    sequence_number = models.IntegerField(null=True, blank=True)
    reason = models.CharField(max_length=16)  # boundary, interval, terminal, handoff
    base_revision = models.PositiveIntegerField(null=True, blank=True)  # NULL: `view` is whole
    view = FastJSONField(null=True, blank=True)
    ops = FastJSONField(null=True, blank=True)
    snapshot = FastJSONField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["request", "-revision"]
        indexes = [
            # the latest checkpoint of a request in one query (ORDER BY revision DESC LIMIT 1), and
            # the rows from its latest base on (revision >= base's) to materialise its view
            models.Index(fields=["request", "-revision"], name="checkpoint_latest"),
        ]

    @property
    def is_base(self) -> bool:
        return self.base_revision is None

    def __str__(self) -> str:
        return f"revision {self.revision} ({self.reason}, {'base' if self.is_base else 'ops'})"


class EventRecord(models.Model):
    """The raw event log, apart from the view model: one row per batch of consecutive events,
    as SSE text (`data: {json}` blocks) with sensitive tool fields redacted.

    Written compressed: `compressed` holds a zstd frame of the batch's exact bytes and `data`
    stays empty (storage.log_compress; what it saves: bench/README.md, storage). Rows of the old
    format hold the text in `data`. Read through `text` either way."""

    request = models.ForeignKey(ResponseRequest, on_delete=models.CASCADE, related_name="event_batches")
    segment_index = models.PositiveIntegerField(default=0)
    first_sequence = models.IntegerField(null=True, blank=True)
    last_sequence = models.IntegerField(null=True, blank=True)
    count = models.PositiveIntegerField()
    data = Utf8TextField(blank=True)
    compressed = models.BinaryField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["request", "id"]

    @property
    def text(self) -> str:
        """The batch as SSE text, byte-exact (bytes that are not UTF-8 as surrogate escapes)."""
        return storage.log_text(self.data, self.compressed)


class ToolCall(models.Model):
    """A function call the relay executes. Unique per (request, call id): a tool runs once per
    logical request, never again on replay, resume or reconnect, and a call id another user's
    model happened to emit too (seeded streams, providers that reuse ids) is never shared."""

    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    request = models.ForeignKey(ResponseRequest, on_delete=models.CASCADE, related_name="tool_calls")
    call_id = models.TextField()
    name = models.TextField()
    arguments = models.JSONField(null=True, blank=True)
    output = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # the claim before a tool runs (services.tool_call_claim) and every lookup by call id,
            # always within one request (selectors.tool_call_output); the id by its digest, whatever its length
            models.UniqueConstraint(F("request"), MD5("call_id"), name="toolcall_once_per_request"),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.call_id} ({self.status})"


class McpApproval(models.Model):
    """A person's answer to an `mcp_approval_request`: stored once (any tab, any reload; a second
    answer is refused), then sent by the runner as an `mcp_approval_response` continuation."""

    request = models.ForeignKey(ResponseRequest, on_delete=models.CASCADE, related_name="mcp_approvals")
    approval_request_id = models.TextField()
    approve = models.BooleanField()
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    decided_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            # one decision per approval request (services.mcp_approval_decide)
            models.UniqueConstraint(F("request"), MD5("approval_request_id"), name="mcp_approval_once"),
        ]

    def __str__(self) -> str:
        return f"{'approved' if self.approve else 'denied'} {self.approval_request_id}"


class SafetyVerdict(models.Model):
    """One check of the safety policy (responses_app/safety/): a window of answer text, a tool's
    arguments or output, or the user's input, with what the checker said and what was done."""

    class Kind(models.TextChoices):
        INPUT = "input"
        OUTPUT = "output"
        TOOL_ARGUMENTS = "tool_arguments"
        TOOL_OUTPUT = "tool_output"

    class Action(models.TextChoices):
        PASSED = "passed"  # shown (or released)
        WITHHELD = "withheld"  # buffered: never shown
        RETRACTED = "retracted"  # progressive: shown, then taken back from every tab
        INPUT_BLOCKED = "input_blocked"  # precheck: no upstream request was made

    request = models.ForeignKey(ResponseRequest, on_delete=models.CASCADE, related_name="safety_verdicts")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    mode = models.CharField(max_length=16)  # progressive, buffered, precheck
    block_id = models.TextField(blank=True)  # made of the provider's item ids
    start = models.PositiveIntegerField(default=0)  # the window's characters in its block's text
    end = models.PositiveIntegerField(default=0)
    text = Utf8TextField(blank=True)  # the window judged: staff only in the admin
    flagged = models.BooleanField()
    action = models.CharField(max_length=16, choices=Action.choices)
    checker = models.CharField(max_length=200)
    categories = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)  # the check failed (timeout ...); `flagged` followed the policy
    elapsed_ms = models.FloatField(default=0.0)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["request", "id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.action} ({self.mode}, {self.checker})"


class Share(models.Model):
    """A read-only link its owner handed out to a conversation, or to one of its turns: anyone with
    the link and an account (or anyone at all, when the owner chose so and RELAY_SHARE_ANONYMOUS
    allows it) sees the committed view and follows it live as a viewer, never as a request of
    theirs. Revoked, it stops working at once, open sockets included (shares.py)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # the link's secret; unique: the lookup of every shared page and socket
    token = models.CharField(max_length=64, unique=True)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="shares")
    request = models.ForeignKey(ResponseRequest, on_delete=models.CASCADE, null=True, blank=True,
                                related_name="shares")  # one turn; NULL: the whole conversation
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    anonymous = models.BooleanField(default=False)  # no account needed (if RELAY_SHARE_ANONYMOUS allows)
    created = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        what = "turn" if self.request_id else "conversation"
        return f"share of a {what}{' (revoked)' if self.revoked_at else ''}"


class AnswerFeedback(models.Model):
    """A person's rating of one answer (helpful or not, and an optional note), one per person and
    answer; the analytics count them and list the notes (feedback.py)."""

    class Rating(models.IntegerChoices):
        UP = 1, "Helpful"
        DOWN = -1, "Not helpful"

    request = models.ForeignKey(ResponseRequest, on_delete=models.CASCADE, related_name="feedback")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    rating = models.SmallIntegerField(choices=Rating.choices)
    note = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "answer feedback"
        constraints = [models.UniqueConstraint(fields=["request", "user"], name="responses_app_feedback_once")]
        indexes = [models.Index(fields=["updated"], name="responses_app_feedback_when")]

    def __str__(self) -> str:
        return f"{self.get_rating_display()}{': ' + self.note[:40] if self.note else ''}"


class SearchDocument(models.Model):
    """PostgreSQL: a turn's search document, GIN-indexed, kept by search.py; a row of its own, so
    the request's row (updated while it streams) never carries it into an index."""

    request = models.OneToOneField(ResponseRequest, on_delete=models.CASCADE, primary_key=True,
                                   related_name="search_document")
    vector = SearchDocumentField()


class Attachment(models.Model):
    """An image or a file a person attached to a message (attachments.py): its bytes in a storage
    (RELAY_ATTACHMENT_STORAGE, Django's storage API), its type told by those bytes (sniff.py). Sent
    upstream as an input_image or input_file part of the turn that lists it in `params.attachments`
    (the turn it came with, and the versions Regenerate and Edit made of it); served only to who may
    see that turn."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    request = models.ForeignKey(ResponseRequest, on_delete=models.CASCADE, related_name="attachments")
    name = models.CharField(max_length=255)  # the file's name as the person's device gave it, for showing
    stored_name = models.CharField(max_length=255)  # its name in the storage
    mime = models.CharField(max_length=64)  # what sniff.py found, never what the browser said
    size = models.PositiveIntegerField()
    width = models.PositiveIntegerField(null=True, blank=True)  # an image's
    height = models.PositiveIntegerField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["request", "created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.mime}, {self.size} bytes)"

    @property
    def is_image(self) -> bool:
        return self.mime.startswith("image/")

"""The admin's parts: every time shown to the second, and the request page's read-only inlines,
which hide what the safety policy withheld (responses_app/admin.py says the rule)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from . import selectors
from .models import (
    AnswerFeedback,
    Attachment,
    Checkpoint,
    McpApproval,
    ResponseRequest,
    SafetyVerdict,
    Segment,
    ToolCall,
)

EVENT_BATCHES_PER_PAGE = 20
WITHHELD_NOTICE = ("Hidden: the safety policy withheld, retracted or blocked text of this request. Its text, tool "
                   "data and raw event log need the view_safetyverdict permission.")
SECOND = "%Y-%m-%d %H:%M:%S"  # Django's own display of a time stops at the minute
TIMES = ("created", "updated", "deleted_at", "started_at", "ended_at", "finished_at", "decided_at",
         "upstream_created_at", "first_text_at", "first_tool_at", "terminal_at", "lease_expires")


def at_second(name: str) -> Any:
    """A column or field that shows the datetime `name` to the second, in the current time zone."""

    @admin.display(description=name.replace("_", " "), ordering=name)
    def shown(model_admin: Any, obj: Any) -> str:
        value = getattr(obj, name, None)
        return timezone.localtime(value).strftime(SECOND) if value else "-"

    shown.__name__ = f"{name}_s"
    return shown


class AtTheSecond:
    """`<name>_s` for every datetime in TIMES: what the admin shows in their place."""


for _name in TIMES:
    setattr(AtTheSecond, f"{_name}_s", at_second(_name))


def seconds(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{name}_s" if name in TIMES else name for name in names)


def event_log_bytes(request: ResponseRequest) -> bytes:
    """The raw event log as one SSE stream: every batch's `data`, in order."""
    return selectors.event_log_text(request_id=request.pk).encode()


class ReadOnlyInline(AtTheSecond, admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TextHidingInline(ReadOnlyInline):
    """Its `text_fields` are left out for a request whose text is withheld from the viewer."""

    text_fields: tuple[str, ...] = ()

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = super().get_fields(request, obj)
        return [f for f in fields if f not in self.text_fields] if hides_text(request, obj) else fields


class SegmentInline(TextHidingInline):
    model = Segment
    fields = seconds(("index", "kind", "response_id", "starting_after", "started_at", "ended_at", "outcome",
                      "http_status", "events", "detail"))
    readonly_fields = fields
    text_fields = ("detail",)  # an upstream's error message


class ToolCallInline(TextHidingInline):
    model = ToolCall
    fields = seconds(("call_id", "name", "status", "arguments", "output", "started_at", "finished_at"))
    readonly_fields = fields
    text_fields = ("arguments", "output")


class McpApprovalInline(ReadOnlyInline):
    model = McpApproval
    fields = seconds(("approval_request_id", "approve", "decided_by", "decided_at"))
    readonly_fields = fields


class CheckpointInline(ReadOnlyInline):
    model = Checkpoint
    fields = seconds(("revision", "sequence_number", "reason", "stored", "created"))
    readonly_fields = fields
    ordering = ("revision",)

    @admin.display(description="stored")
    def stored(self, obj: Checkpoint) -> str:
        if obj.is_base:
            return "the whole view" + (" and the Response" if obj.snapshot is not None else "")
        ops = obj.ops or []
        return (f"{len(ops)} op{'s' if len(ops) != 1 else ''} since revision {obj.base_revision}"
                + (" and the Response" if obj.snapshot is not None else ""))


def can_read_safety_text(request: HttpRequest) -> bool:
    return bool(request.user.is_staff and selectors.can_read_withheld(request.user))


def hides_text(request: HttpRequest, obj: ResponseRequest | None) -> bool:
    """This request's text is withheld from this viewer (asked once per page)."""
    if obj is None or obj.pk is None or can_read_safety_text(request):
        return False
    known: dict[Any, bool] = request.__dict__.setdefault("_relay_withheld", {})
    if obj.pk not in known:
        known[obj.pk] = selectors.request_has_withheld_text(request_id=obj.pk)
    return known[obj.pk]


SAFETY_FIELDS = seconds(("created", "kind", "mode", "action", "block_id", "start", "end", "checker",
                         "categories_shown", "error", "elapsed_ms"))


class SafetyVerdictInline(ReadOnlyInline):
    """Every check of the request, in order; the judged text only for those who may read it."""

    model = SafetyVerdict
    verbose_name_plural = "safety verdicts"
    readonly_fields = (*SAFETY_FIELDS, "text")
    ordering = ("id",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return (*SAFETY_FIELDS, "text") if can_read_safety_text(request) else SAFETY_FIELDS

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Part of the request's audit: whoever may read the request sees its verdicts.
        return bool(request.user.has_perm("responses_app.view_responserequest"))

    @admin.display(description="categories")
    def categories_shown(self, obj: SafetyVerdict) -> str:
        return ", ".join(obj.categories or []) or "-"


class AnswerFeedbackInline(ReadOnlyInline):
    model = AnswerFeedback
    fields = readonly_fields = ("user", "rating", "note", "updated")


class AttachmentInline(ReadOnlyInline):
    """The files sent with the turn, each opened through the turn's own address (the view permission)."""

    model = Attachment
    fields = readonly_fields = ("file", "mime", "size", "width", "height")

    @admin.display(description="file")
    def file(self, obj: Attachment) -> str:
        url = reverse("responses_app:chat-attachment", args=[obj.request.conversation_id, obj.request_id, obj.pk])
        return format_html('<a href="{}">{}</a>', url, obj.name)

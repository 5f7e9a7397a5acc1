"""The admin as an audit tool: read-only requests with their segments, tool calls, checkpoints, the
safety policy's verdicts and a paginated raw event log, downloadable as an `.sse` file that
`manage.py replay` accepts.

The text a safety verdict judged (withheld or retracted answer text, a blocked prompt) is shown only
to superusers and to staff with the `view_safetyverdict` permission; other staff who may read the
request see each verdict without it. The rule is per request, because that text also sits in what
is derived from the answer: when the policy withheld, retracted or blocked anything of a request
(`selectors.request_has_withheld_text`), its prompt, final text, error message, conversation
title, tool calls' arguments and outputs and segments' details are hidden on its page (which
says why), and its raw event log (the page, `events.sse` and the download action) is refused
with 403, to staff without `view_safetyverdict`."""

from __future__ import annotations

import io
import uuid
import zipfile
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from . import pricing, selectors
from .admin_inlines import (
    EVENT_BATCHES_PER_PAGE,
    SAFETY_FIELDS,
    TIMES,
    WITHHELD_NOTICE,
    AnswerFeedbackInline,
    AttachmentInline,
    AtTheSecond,
    CheckpointInline,
    McpApprovalInline,
    SafetyVerdictInline,
    SegmentInline,
    ToolCallInline,
    can_read_safety_text,
    event_log_bytes,
    hides_text,
    seconds,
)
from .models import (
    AnswerFeedback,
    Conversation,
    Preset,
    ResponseRequest,
    SafetyVerdict,
)


@admin.register(ResponseRequest)
class ResponseRequestAdmin(AtTheSecond, admin.ModelAdmin):
    list_display = seconds(("short_id", "status", "model", "owner", "response_id", "ttft_ms", "duration_ms", "events",
                            "created"))
    list_filter = ("status", "model", ("created", admin.DateFieldListFilter))
    # "^id": the short id the list shows (its first characters) finds the request; so does its model.
    search_fields = ("^id", "response_id", "model", "owner__username", "client_request_id")
    list_select_related = ("owner",)
    date_hierarchy = "created"
    ordering = ("-created",)
    inlines = (AttachmentInline, SegmentInline, ToolCallInline, McpApprovalInline, SafetyVerdictInline,
               AnswerFeedbackInline, CheckpointInline)
    actions = ("download_event_logs",)
    fieldsets = (
        (None, {"fields": ("id", "status", "model", "owner", "conversation", "links", "client_request_id",
                           "response_id", "copy_of", "prompt", "final_text")}),
        ("Outcome", {"fields": ("error_code", "error_message", "incomplete_reason", "usage", "cost")}),
        ("Timing", {"fields": seconds(("created", "upstream_created_at", "first_text_at", "ttft_ms", "first_tool_at",
                                       "terminal_at", "duration_ms"))}),
        ("Stream", {"fields": ("events", "last_sequence_number", "duplicates", "out_of_order", "gaps",
                               "unknown_events", "malformed_events", "disconnects", "retries")}),
        ("Viewers", {"fields": ("viewer_connections", "reconnects", "cancels", "cancel_requested")}),
        ("Runner", {"fields": seconds(("runner_token", "lease_expires", "params")), "classes": ("collapse",)}),
    )

    class Media:
        css = {"all": ("responses_app/admin.css",)}

    # Shown in place of these fields when the request's text is withheld from the viewer.
    WITHHELD_FIELDS: dict[Any, str | None] = {
        "prompt": "withheld", "final_text": None, "error_message": None, "conversation": "conversation_id_only",
        "links": "links_without_log"}

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        names = [f.name for f in ResponseRequest._meta.fields]
        return names + ["links", "prompt", "ttft_ms", "cost", "withheld", "conversation_id_only",
                        "links_without_log"] + [f"{name}_s" for name in TIMES]

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if not hides_text(request, obj):
            return fieldsets
        swap = self.WITHHELD_FIELDS
        return [(name, {**options, "fields": tuple(swap.get(f, f) for f in options["fields"] if swap.get(f, f))})
                for name, options in fieldsets]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # an audit record: viewable, never edited here

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # --- columns ---------------------------------------------------------------------------------

    @admin.display(description="request", ordering="id")
    def short_id(self, obj: ResponseRequest) -> str:
        return str(obj.pk)[:8]

    @admin.display(description="time to first text (ms)", ordering="first_text_at")
    def ttft_ms(self, obj: ResponseRequest) -> int | None:
        return obj.ms_since_created(obj.first_text_at)

    @admin.display(description="cost")
    def cost(self, obj: ResponseRequest) -> str:
        return pricing.cost_text(pricing.cost_of(obj.usage, obj.model)) or "-"  # "-": no usage, or no price

    @admin.display(description="prompt")
    def prompt(self, obj: ResponseRequest) -> str:
        return obj.prompt_text

    @admin.display(description="withheld text")
    def withheld(self, obj: ResponseRequest) -> str:
        return WITHHELD_NOTICE

    @admin.display(description="conversation")
    def conversation_id_only(self, obj: ResponseRequest) -> str:
        return str(obj.conversation_id or "-")  # its title is the first prompt, which may be what was blocked

    @admin.display(description="links")
    def links(self, obj: ResponseRequest) -> str:
        return self._links(obj, log=True)

    @admin.display(description="links")
    def links_without_log(self, obj: ResponseRequest) -> str:
        return self._links(obj, log=False)

    def _links(self, obj: ResponseRequest, *, log: bool) -> str:
        if obj.pk is None:
            return "-"
        parts = []
        if log:
            events = reverse("admin:responses_app_responserequest_events", args=[obj.pk])
            download = reverse("admin:responses_app_responserequest_events_sse", args=[obj.pk])
            parts += [format_html('<a href="{}">Event log ({} batches)</a>', events,
                                  selectors.event_batches(request_id=obj.pk).count()),
                      format_html('<a href="{}">Download .sse</a>', download)]
        if obj.conversation_id:
            chat = reverse("responses_app:chat", args=[obj.conversation_id]) + f"#turn-{obj.pk}"
            label = "Watch live" if not obj.is_terminal else "Open in chat"
            parts.append(format_html('<a href="{}">{}</a>', chat, label))
        return format_html(" · ".join(["{}"] * len(parts)), *parts) if parts else "-"

    # --- search: request ids too -------------------------------------------------------------------

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
                           ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        try:
            request_id = uuid.UUID(term)
        except ValueError:
            return super().get_search_results(request, queryset, search_term)
        return queryset.filter(pk=request_id) | queryset.filter(client_request_id=term), False

    # --- event log ------------------------------------------------------------------------------------

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view
        return [
            path("<uuid:object_id>/events/", view(self.events_view), name="responses_app_responserequest_events"),
            path("<uuid:object_id>/events.sse", view(self.events_download),
                 name="responses_app_responserequest_events_sse"),
            *super().get_urls(),
        ]

    def _get_viewable(self, request: HttpRequest, object_id: uuid.UUID) -> ResponseRequest:
        obj = self.get_object(request, str(object_id))
        if obj is None:
            raise Http404("No such request")
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        if hides_text(request, obj):
            raise PermissionDenied(WITHHELD_NOTICE)
        return obj

    def events_view(self, request: HttpRequest, object_id: uuid.UUID) -> HttpResponse:
        obj = self._get_viewable(request, object_id)
        batches = selectors.event_batches(request_id=obj.pk)
        page = Paginator(batches, EVENT_BATCHES_PER_PAGE).get_page(request.GET.get("page"))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": obj,
            "title": f"Event log of {obj}",
            "page": page,
            "download_url": reverse("admin:responses_app_responserequest_events_sse", args=[obj.pk]),
            "change_url": reverse("admin:responses_app_responserequest_change", args=[obj.pk]),
        }
        return TemplateResponse(request, "admin/responses_app/responserequest/events.html", context)

    def events_download(self, request: HttpRequest, object_id: uuid.UUID) -> HttpResponse:
        obj = self._get_viewable(request, object_id)
        return self._sse_response(obj)

    @staticmethod
    def _sse_response(obj: ResponseRequest) -> HttpResponse:
        response = HttpResponse(event_log_bytes(obj), content_type="text/event-stream; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="request-{obj.pk}.sse"'
        return response

    @admin.action(description="Download event logs (.sse; a .zip for several)")
    def download_event_logs(self, request: HttpRequest, queryset: QuerySet[ResponseRequest]) -> HttpResponse | None:
        requests = list(queryset.order_by("created"))
        withheld = [obj for obj in requests if hides_text(request, obj)]
        if withheld:
            self.message_user(request, f"Nothing was downloaded: {len(withheld)} of these requests have text the "
                              "safety policy withheld, retracted or blocked; their event logs need the "
                              "view_safetyverdict permission.", messages.ERROR)
            return None
        if len(requests) == 1:
            return self._sse_response(requests[0])
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for obj in requests:
                archive.writestr(f"request-{obj.pk}.sse", event_log_bytes(obj))
        response = HttpResponse(buffer.getvalue(), content_type="application/zip")
        response["Content-Disposition"] = 'attachment; filename="event-logs.zip"'
        return response


@admin.register(SafetyVerdict)
class SafetyVerdictAdmin(AtTheSecond, admin.ModelAdmin):
    """Every verdict across requests: filter by what was done, what was judged, and by whom."""

    list_display = ("created_s", "request_link", "kind", "mode", "action", "checker", "categories_shown", "flagged",
                    "error", "elapsed_ms")
    list_filter = ("action", "kind", "checker", "mode", "flagged", ("created", admin.DateFieldListFilter))
    list_select_related = ("request",)
    search_fields = ("request__id", "block_id")
    date_hierarchy = "created"
    ordering = ("-created", "-id")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return ("request", *SAFETY_FIELDS, "flagged", *(("text",) if can_read_safety_text(request) else ()))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return self.get_fields(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="request", ordering="request")
    def request_link(self, obj: SafetyVerdict) -> str:
        url = reverse("admin:responses_app_responserequest_change", args=[obj.request_id])
        return format_html('<a href="{}">{}</a>', url, str(obj.request_id)[:8])

    @admin.display(description="categories")
    def categories_shown(self, obj: SafetyVerdict) -> str:
        return ", ".join(obj.categories or []) or "-"


@admin.register(Conversation)
class ConversationAdmin(AtTheSecond, admin.ModelAdmin):
    list_display = ("__str__", "owner", "created_s", "updated_s", "request_count", "last_response_id", "deleted_at_s")
    search_fields = ("title", "owner__username", "last_response_id")
    list_filter = (("created", admin.DateFieldListFilter), ("deleted_at", admin.EmptyFieldListFilter))
    list_select_related = ("owner",)
    exclude = ("created", "updated", "deleted_at")  # shown to the second instead
    readonly_fields = seconds(("id", "created", "updated", "last_response_id", "deleted_at", "chat_link"))

    @admin.display(description="requests")
    def request_count(self, obj: Conversation) -> int:
        return obj.requests.count()

    @admin.display(description="chat")
    def chat_link(self, obj: Conversation) -> str:
        return format_html('<a href="{}">Open the chat page</a>', reverse("responses_app:chat", args=[obj.pk]))


NOT_OFFERED = "{value} is not a model this site offers: choose one of the list, or leave it empty."


class PresetForm(forms.ModelForm):
    """A preset's model is one the composer offers (web/pages.model_groups), or none. A model
    saved before the site stopped offering it is shown, and refused until it is changed."""

    class Meta:
        model = Preset
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Here, not at the top: the admin is imported by django.setup() (autodiscover), and a
        # process that serves no pages (a worker) must not import the web layer with it.
        from .web.pages import model_groups

        groups = model_groups()
        self.offered = {model for _label, group in groups for model in group}
        options: list[Any] = [("", "None: the model the person chose")]
        for label, group in groups:
            pairs = [(model, model) for model in group]
            options += [(label, pairs)] if label else pairs
        saved = self.instance.model if self.instance.pk else ""
        if saved and saved not in self.offered:
            options.append((saved, f"{saved} (no longer offered)"))
        field = Preset._meta.get_field("model")
        self.fields["model"] = forms.ChoiceField(
            choices=options, required=False, label="Model", help_text=field.help_text,
            error_messages={"invalid_choice": NOT_OFFERED.replace("{value}", "%(value)s")})

    def clean_model(self) -> str:
        model: str = self.cleaned_data.get("model") or ""
        if model and model not in self.offered:
            raise forms.ValidationError(NOT_OFFERED.format(value=model), code="not_offered")
        return model


@admin.register(Preset)
class PresetAdmin(admin.ModelAdmin):
    """Settings people may apply to their conversations (turn_settings.py): staff with the preset
    permissions add and change them; applying copies, so an edit here changes no conversation. A
    preset's model (optional) is checked against the models the site offers (PresetForm)."""

    form = PresetForm
    list_display = ("name", "description", "model", "instructions_start", "temperature", "reasoning_effort",
                    "max_output_tokens")
    search_fields = ("name", "description", "instructions")

    @admin.display(description="instructions")
    def instructions_start(self, obj: Preset) -> str:
        return obj.instructions[:60] + ("…" if len(obj.instructions) > 60 else "")


@admin.register(AnswerFeedback)
class AnswerFeedbackAdmin(AtTheSecond, admin.ModelAdmin):
    """What people said of answers (feedback.py): read here, never changed for them."""

    list_display = ("rating", "note", "user", "request_link", "updated")
    list_filter = ("rating", ("updated", admin.DateFieldListFilter))
    search_fields = ("note", "user__username", "request__model")
    list_select_related = ("user",)
    ordering = ("-updated",)
    readonly_fields = ("request", "user", "rating", "note", "created", "updated")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="answer", ordering="request")
    def request_link(self, obj: AnswerFeedback) -> str:
        url = reverse("admin:responses_app_responserequest_change", args=[obj.request_id])
        return format_html('<a href="{}">{}</a>', url, str(obj.request_id)[:8])

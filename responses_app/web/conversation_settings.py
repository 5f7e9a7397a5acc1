"""A conversation's settings (turn_settings.py) on the chat page: the Settings panel beside the title,
its own page (what a refused save shows, with the errors in words), Save and Apply preset.

Plain forms that POST and redirect back to the conversation; the owner only (403 for anyone else
who may see it, 404 for the rest). Without the script the panel is a <details>; nothing here needs it.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from .. import turn_settings
from ..conf import app_settings
from ..models import Conversation
from ..turn_settings import Preset
from .pages import own_conversation, page

EFFORT_CHOICES = [("", "The model’s default"), *[(e, e.capitalize()) for e in turn_settings.EFFORTS]]


class SettingsForm(forms.ModelForm):
    """The four settings, each optional, every error worded for the person who typed it."""

    reasoning_effort = forms.ChoiceField(
        choices=EFFORT_CHOICES, required=False, label="Reasoning effort",
        error_messages={"invalid_choice": "Choose low, medium, high or the model’s default for reasoning effort."})

    class Meta:
        model = Conversation
        fields = list(turn_settings.FIELDS)
        labels = {"instructions": "Instructions", "temperature": "Temperature", "max_output_tokens": "Maximum length"}
        error_messages = {
            "temperature": {"invalid": turn_settings.TEMPERATURE_WORDS},
            "max_output_tokens": {"invalid": "Maximum length takes a whole number of tokens, or leave it empty.",
                                  "min_value": "Maximum length takes a whole number of tokens from 1."},
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["instructions"].widget.attrs.update({"rows": "3",
                                                         "maxlength": str(app_settings.INSTRUCTIONS_MAX_CHARS)})
        self.fields["temperature"].widget.attrs.update({"min": "0", "max": "2", "step": "0.1", "inputmode": "decimal"})
        self.fields["max_output_tokens"].widget.attrs.update({"min": "1", "max": str(app_settings.MAX_OUTPUT_TOKENS)})
        for name, field in self.fields.items():
            field.widget.attrs["id"] = f"settings-{name}"
            field.help_text = HELP[name]
            field.widget.attrs["aria-describedby"] = f"settings-{name}-help"

    def error_lines(self) -> list[dict[str, str]]:
        return [{"field": name, "text": str(message)} for name, messages in self.errors.items() for message in messages]


HELP = {
    "instructions": "Sent with every message of this conversation, before it. Empty: none.",
    "temperature": "From 0 (steady) to 2 (varied). Empty: the model’s default.",
    "reasoning_effort": "How long a reasoning model thinks before it answers.",
    "max_output_tokens": "The longest answer, in tokens. Empty: the server’s limit.",
}


def panel(conversation: Conversation, form: SettingsForm | None = None) -> dict[str, Any]:
    """What the Settings panel shows: the form (with the conversation's values) and the presets."""
    form = form or SettingsForm(instance=conversation)
    for name in form.errors:
        if name in form.fields:
            form.fields[name].widget.attrs["aria-invalid"] = "true"
    summary = [label for name, label in (("instructions", "instructions"), ("temperature", "temperature"),
                                         ("reasoning_effort", "effort"), ("max_output_tokens", "length"))
               if getattr(conversation, name) not in (None, "")]
    return {"settings_form": form, "presets": list(Preset.objects.all()), "settings_summary": ", ".join(summary),
            "max_output_tokens_cap": app_settings.MAX_OUTPUT_TOKENS}


def _back(conversation: Conversation) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("responses_app:chat", args=[conversation.pk]) + "#settings")


@login_required
@require_http_methods(["GET", "POST"])
def conversation_settings(http: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """GET: the settings on a page of their own. POST: save them (back to the conversation), or
    this page again with what was typed and why it was refused (400)."""
    conversation = own_conversation(http, conversation_id, "Only the owner can change a conversation’s settings")
    if http.method == "POST":
        form = SettingsForm(http.POST, instance=Conversation.objects.get(pk=conversation.pk))
        if form.is_valid():
            form.save(commit=False)
            form.instance.save(update_fields=list(turn_settings.FIELDS))
            return _back(conversation)
        return page(http, "responses_app/conversation_settings.html",
                    {"conversation": conversation, **panel(conversation, form)}, status=400)
    return page(http, "responses_app/conversation_settings.html", {"conversation": conversation, **panel(conversation)})


@login_required
@require_POST
def conversation_preset(http: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """Apply preset: its values copied into the conversation."""
    conversation = own_conversation(http, conversation_id, "Only the owner can change a conversation’s settings")
    try:
        preset = Preset.objects.get(pk=int(http.POST.get("preset", "")))
    except (ValueError, Preset.DoesNotExist):
        raise Http404("No such preset: choose one of the list.") from None
    turn_settings.copy_preset(conversation=conversation, preset=preset)
    return _back(conversation)

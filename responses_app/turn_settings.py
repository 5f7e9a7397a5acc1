"""What a conversation asks of the model besides the prompt, and the staff's presets of it.

Four settings, each optional (a value not set is not sent: the provider's default holds):
instructions (a system prompt), temperature (0 to 2), reasoning effort (low, medium or high) and
a maximum length (max_output_tokens, at most RELAY_MAX_OUTPUT_TOKENS). A conversation holds its
own (`GenerationSettings`); every new turn of it, Regenerate and Continue included, sends the
values it holds at that moment (`apply`, from submission.submit), and the turn's params record what
was sent. A `Preset` is a named set of the same four, kept by staff in the admin: applying one
copies its values into the conversation, so later edits of the preset change no conversation.
A preset may name a model too: a turn sent with a preset goes to it unless the person chose one
(`model_for`, from forms.SubmitForm: the one place that decides); the admin offers only the
models the site offers (admin.PresetForm), and the door checks the model again at every turn.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from .conf import app_settings

EFFORTS = ("low", "medium", "high")
APPLIED = "conversation_settings"  # params: which of the sent keys came from the conversation's settings
FIELDS = ("instructions", "temperature", "reasoning_effort", "max_output_tokens")


def _unstorable(text: str) -> bool:
    return "\x00" in text or any("\ud800" <= c <= "\udfff" for c in text)


def validate_instructions(value: str) -> None:
    """At most RELAY_INSTRUCTIONS_MAX_CHARS characters of storable text."""
    limit = app_settings.INSTRUCTIONS_MAX_CHARS
    if len(value) > limit:
        raise ValidationError(f"Instructions take at most {limit:,} characters; these have {len(value):,}. "
                              "Shorten them and save again.", code="too_long")
    if _unstorable(value):
        raise ValidationError("Instructions contain a character that cannot be stored (a NUL). Remove it "
                              "and save again.", code="unstorable")


def validate_max_output_tokens(value: int) -> None:
    """From 1 to RELAY_MAX_OUTPUT_TOKENS."""
    cap = app_settings.MAX_OUTPUT_TOKENS
    if not 1 <= value <= cap:
        raise ValidationError(f"Maximum length takes a whole number of tokens from 1 to {cap:,}.", code="range")


TEMPERATURE_WORDS = "Temperature takes a number from 0 to 2 (for example 0.7), or leave it empty."


class GenerationSettings(models.Model):
    """The four settings, none set by default."""

    instructions = models.TextField(blank=True, validators=[validate_instructions],
                                    help_text="A system prompt sent with every turn; empty: none.")
    temperature = models.FloatField(null=True, blank=True, help_text="0 to 2; empty: the model's default.",
                                    validators=[MinValueValidator(0.0, message=TEMPERATURE_WORDS),
                                                MaxValueValidator(2.0, message=TEMPERATURE_WORDS)])
    reasoning_effort = models.CharField(max_length=8, blank=True, choices=[(e, e.capitalize()) for e in EFFORTS],
                                        help_text="Empty: the model's default.")
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True, validators=[validate_max_output_tokens],
                                                    help_text="The longest answer, in tokens; empty: no limit "
                                                              "but the server's.")

    class Meta:
        abstract = True


def validate_model_name(value: str) -> None:
    """A model id as the composer sends it: no spaces, storable."""
    if any(c.isspace() for c in value) or _unstorable(value):
        raise ValidationError("A model id has no spaces or control characters: choose one of the list.",
                              code="model_name")


class Preset(GenerationSettings):
    """Settings a staff member names for people to apply to their conversations."""

    name = models.CharField(max_length=80, unique=True)
    description = models.CharField(max_length=200, blank=True, help_text="What it is for, in a few words.")
    # db_default: a row written without it (a fixture, raw SQL) names no model, as Django's do.
    model = models.CharField(max_length=100, blank=True, default="", db_default="", validators=[validate_model_name],
                             help_text="The model a message sent with this preset uses; empty: the one the "
                                       "person chose.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def values_of(settings: Any) -> dict[str, Any]:
    """The four settings of a conversation or a preset."""
    return {name: getattr(settings, name) for name in FIELDS}


def upstream_params(settings: Any) -> dict[str, Any]:
    """The request parameters the settings ask for: only those set."""
    params: dict[str, Any] = {}
    if settings.instructions:
        params["instructions"] = settings.instructions
    if settings.temperature is not None:
        params["temperature"] = float(settings.temperature)
    if settings.reasoning_effort in EFFORTS:
        params["reasoning"] = {"effort": settings.reasoning_effort}
    if settings.max_output_tokens:
        params["max_output_tokens"] = min(int(settings.max_output_tokens), app_settings.MAX_OUTPUT_TOKENS)
    return params


def apply(params: dict[str, Any], settings: Any) -> None:
    """A new turn's params with the conversation's settings (they win over a value the request
    carried, such as the max_output_tokens Regenerate copies from the turn it redoes)."""
    sent = upstream_params(settings)
    params.update(sent)
    if sent:
        params[APPLIED] = sorted(sent)


def from_settings(params: dict[str, Any], key: str) -> bool:
    """The turn sent `key` because its conversation's settings asked (not the request itself)."""
    return key in (params.get(APPLIED) or ())


def model_for(*, chosen: str, preset: Preset | None) -> str:
    """The model a turn is sent to: the one the person chose, else its preset's (empty: none)."""
    return chosen or (preset.model if preset is not None else "")


def copy_preset(*, conversation: Any, preset: Preset) -> None:
    """The preset's values into the conversation: a copy, not a link."""
    for name, value in values_of(preset).items():
        setattr(conversation, name, value)
    conversation.save(update_fields=[*FIELDS])

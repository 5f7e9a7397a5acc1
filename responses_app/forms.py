"""Validation of what users submit, shared by the chat page and the JSON API.

Strict about types: a JSON body's `input` is a string or a list of input items, `model` a string,
`background` a boolean; nothing is coerced into a repr string or silently defaulted, and every
error names its field. Metadata follows the Responses API's own limits (16 pairs, keys up to 64
characters, string values up to 512, no NUL); `sim.*` keys reach only the simulator. Text bound for
the database never carries U+0000 (PostgreSQL refuses it) or a lone surrogate.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import orjson
from django import forms

from . import turn_settings
from .conf import app_settings
from .turn_settings import Preset

MAX_INPUT_CHARS = 32_000
MAX_INPUT_ITEMS = 100
MAX_INPUT_BYTES = 256 * 1024  # a list of input items, as JSON
MAX_METADATA_KEYS = 16  # the Responses API's own limits
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
SIM_PREFIX = "sim."
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_TRUE = ("true", "1", "on", "yes")
_FALSE = ("false", "0", "off", "no")


def unstorable(text: str) -> bool:
    """What no text column of PostgreSQL's takes: U+0000 or a lone surrogate."""
    return _UNSTORABLE.search(text) is not None


def _strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings_in(k), *_strings_in(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings_in(v)]
    return []


class _RawField(forms.Field):
    """A field that sees the submitted value as it is (a JSON body's list, dict or bool)."""

    widget = forms.TextInput

    def __init__(self, *, required: bool = True) -> None:
        super().__init__(required=required)


class InputField(_RawField):
    def to_python(self, value: Any) -> str | list[dict[str, Any]]:
        if isinstance(value, str):
            text = value.strip()
            if len(text) > MAX_INPUT_CHARS:
                raise forms.ValidationError(f"input takes at most {MAX_INPUT_CHARS} characters.")
            if unstorable(text):
                raise forms.ValidationError("input contains U+0000 or a lone surrogate.")
            return text
        if isinstance(value, list):
            if len(value) > MAX_INPUT_ITEMS:
                raise forms.ValidationError(f"input takes at most {MAX_INPUT_ITEMS} items.")
            for index, item in enumerate(value):
                if not isinstance(item, dict) or not (isinstance(item.get("type"), str)
                                                      or isinstance(item.get("role"), str)):
                    raise forms.ValidationError(
                        f"input[{index}] must be an input item: an object with a string 'type' or 'role'.")
            if len(orjson.dumps(value)) > MAX_INPUT_BYTES:
                raise forms.ValidationError(f"input takes at most {MAX_INPUT_BYTES} bytes of items.")
            if any(unstorable(s) for s in _strings_in(value)):
                raise forms.ValidationError("input contains U+0000 or a lone surrogate.")
            return value
        if value is None:
            return ""
        raise forms.ValidationError(f"input must be a string or a list of input items, not {type(value).__name__}.")


class StringField(_RawField):
    def __init__(self, *, max_length: int, required: bool = True) -> None:
        super().__init__(required=required)
        self.max_length = max_length

    def to_python(self, value: Any) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise forms.ValidationError(f"must be a string, not {type(value).__name__}.")
        value = value.strip()
        if len(value) > self.max_length:
            raise forms.ValidationError(f"takes at most {self.max_length} characters.")
        if unstorable(value):
            raise forms.ValidationError("contains U+0000 or a lone surrogate.")
        return value


class StrictBooleanField(_RawField):
    """true/false (JSON), or the same words from a form; anything else is an error, not a default."""

    def __init__(self) -> None:
        super().__init__(required=False)

    def to_python(self, value: Any) -> bool | None:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            word = value.strip().lower()
            if word == "":
                return None
            if word in _TRUE:
                return True
            if word in _FALSE:
                return False
        raise forms.ValidationError(f"must be true or false, not {value!r}."[:200])


class PositiveIntegerField(_RawField):
    def __init__(self) -> None:
        super().__init__(required=False)

    def to_python(self, value: Any) -> int | None:
        if value is None or value == "":
            return None
        if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value.strip()) <= 18:
            value = int(value.strip())  # ASCII digits, and never a number int() refuses to read
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise forms.ValidationError("must be a positive integer.")
        return value


class MetadataField(_RawField):
    """An object of string values, or its JSON text (the page's form and chat.js send text)."""

    def __init__(self) -> None:
        super().__init__(required=False)

    def to_python(self, value: Any) -> dict[str, str]:
        if value is None or (isinstance(value, str) and not value.strip()):
            return {}
        if isinstance(value, str):
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                raise forms.ValidationError("metadata is not valid JSON.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("metadata must be an object of string values.")
        if len(value) > MAX_METADATA_KEYS:
            raise forms.ValidationError(f"metadata takes at most {MAX_METADATA_KEYS} keys.")
        for key, item in value.items():
            label = repr(key[:MAX_METADATA_KEY])
            if not isinstance(item, str):
                raise forms.ValidationError(f"metadata[{label}] must be a string, as the API requires.")
            if len(key) > MAX_METADATA_KEY:
                raise forms.ValidationError(f"metadata keys take at most {MAX_METADATA_KEY} characters.")
            if len(item) > MAX_METADATA_VALUE:
                raise forms.ValidationError(f"metadata[{label}] takes at most {MAX_METADATA_VALUE} characters.")
            if not key or unstorable(key) or unstorable(item):
                raise forms.ValidationError("metadata keys and values must be non-empty text without U+0000.")
        return value


class SubmitForm(forms.Form):
    input = InputField()
    preset = PositiveIntegerField()  # before `model`: a preset may name the model (turn_settings.model_for)
    model = StringField(max_length=100)
    conversation = forms.UUIDField(required=False)
    client_request_id = StringField(max_length=100, required=False)
    background = StrictBooleanField()
    metadata = MetadataField()
    max_output_tokens = PositiveIntegerField()

    def __init__(self, data: dict[str, Any], *, attached: bool = False) -> None:
        super().__init__(data)
        self.fields["input"].required = not attached  # a message may be its attachments alone
        self.fields["model"].required = data.get("preset") in (None, "")

    def clean_preset(self) -> Preset | None:
        """A staff preset (its id): sent with it, the turn takes its settings, and its model when
        none is chosen."""
        pk: int | None = self.cleaned_data.get("preset")
        if pk is None:
            return None
        preset = Preset.objects.filter(pk=pk).first()
        if preset is None:
            raise forms.ValidationError("No such preset: choose one of the list.")
        return preset

    def clean_model(self) -> str:
        model = turn_settings.model_for(chosen=self.cleaned_data.get("model") or "",
                                        preset=self.cleaned_data.get("preset"))
        if not model or any(c.isspace() for c in model):
            raise forms.ValidationError("Choose a model.")
        allowed = app_settings.ALLOWED_MODELS
        if allowed and model not in allowed:
            raise forms.ValidationError(f"Unknown model {model!r}: this server allows {', '.join(allowed)}.")
        return model

    def clean_client_request_id(self) -> str:
        value: str = self.cleaned_data.get("client_request_id") or ""
        return value or str(uuid.uuid4())

    def clean_metadata(self) -> dict[str, str]:
        value: dict[str, str] = self.cleaned_data.get("metadata") or {}
        simulated = [key for key in value if key.startswith(SIM_PREFIX)]
        if simulated and not app_settings.upstream_is_simulator:
            raise forms.ValidationError(f"metadata key {simulated[0]!r}: sim.* keys are only for the simulator.")
        tokens = value.get("sim.tokens")
        cap = app_settings.MAX_OUTPUT_TOKENS
        if tokens is not None and (not tokens.isdigit() or int(tokens) > cap):
            raise forms.ValidationError(f"sim.tokens must be an integer up to RELAY_MAX_OUTPUT_TOKENS ({cap}).")
        return value

    def clean_max_output_tokens(self) -> int | None:
        """At most the cap; a real provider always gets the cap when none is asked for."""
        value: int | None = self.cleaned_data.get("max_output_tokens")
        cap = app_settings.MAX_OUTPUT_TOKENS
        if value is not None and value > cap:
            raise forms.ValidationError(f"max_output_tokens takes at most {cap} (RELAY_MAX_OUTPUT_TOKENS).")
        if value is None and not app_settings.upstream_is_simulator:
            return cap
        return value

"""Validation of what users submit, shared by the chat page and the JSON API."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.conf import settings

MAX_INPUT_CHARS = 32_000
MAX_METADATA_KEYS = 16  # the Responses API's own limits
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512


class SubmitForm(forms.Form):
    input = forms.CharField(max_length=MAX_INPUT_CHARS, strip=True)
    model = forms.CharField(max_length=100)
    conversation = forms.UUIDField(required=False)
    client_request_id = forms.CharField(max_length=100, required=False)
    background = forms.NullBooleanField(required=False)
    metadata = forms.JSONField(required=False)

    def clean_model(self) -> str:
        model: str = self.cleaned_data["model"].strip()
        if not model or any(c.isspace() for c in model):
            raise forms.ValidationError("Choose a model.")
        allowed = getattr(settings, "RELAY_ALLOWED_MODELS", None)
        if allowed and model not in allowed:
            raise forms.ValidationError(f"Unknown model {model!r}.")
        return model

    def clean_client_request_id(self) -> str:
        value: str = (self.cleaned_data.get("client_request_id") or "").strip()
        return value or str(uuid.uuid4())

    def clean_metadata(self) -> dict[str, str]:
        value: Any = self.cleaned_data.get("metadata")
        if value in (None, ""):
            return {}
        if not isinstance(value, dict):
            raise forms.ValidationError("metadata must be an object of string values.")
        if len(value) > MAX_METADATA_KEYS:
            raise forms.ValidationError(f"metadata takes at most {MAX_METADATA_KEYS} keys.")
        for key, item in value.items():
            if not isinstance(item, str):
                raise forms.ValidationError(f"metadata[{key!r}] must be a string, as the API requires.")
            if len(key) > MAX_METADATA_KEY or len(item) > MAX_METADATA_VALUE:
                raise forms.ValidationError(f"metadata[{key!r}] is too long.")
        return value

"""The composer's errors in words a person reads, tied to the field they are about.

The form and the JSON API name fields as a program does ("input: This field is required."); the
pages say "Write a message first." instead. The same labels reach the browser through the page's
vocabulary (turns.vocabulary()), so composer.js words an error from the JSON API the same way
(`errorWords` there follows `for_people` here)."""

from __future__ import annotations

import re
from typing import TypedDict

REQUIRED_DJANGO = "This field is required."

# What the composer's fields are called on the page.
LABELS = {
    "input": "Your message",
    "model": "The model",
    "metadata": "The metadata (under Advanced)",
    "attachments": "The attachments",
}
# What a person is asked to do when a field the composer needs is empty.
REQUIRED = {
    "input": "Write a message first.",
    "model": "Choose a model.",
}
# The fields that have a control in the composer, and its id (aria-invalid and aria-describedby go there).
CONTROLS = {"input": "composer-input", "metadata": "composer-metadata", "attachments": "composer-files"}


class ErrorLine(TypedDict):
    field: str
    text: str


def for_people(field: str, message: str) -> str:
    """One error of `field` as a sentence: never the field's program name."""
    if message == REQUIRED_DJANGO:
        return REQUIRED.get(field) or f"{LABELS.get(field, 'This')} is required."
    label = LABELS.get(field)
    if label is None:
        return message  # a refusal ("request") or a field the page has no control for: already words
    named = re.match(rf"{re.escape(field)}\b\s*", message)
    if named:
        return f"{label} {message[named.end():]}"
    if message[:1].islower():
        return f"{label} {message}"
    return message


def error_lines(errors: dict[str, list[str]]) -> list[ErrorLine]:
    return [{"field": field, "text": for_people(field, message)}
            for field, messages in errors.items() for message in messages]


def vocabulary() -> dict[str, object]:
    return {"labels": LABELS, "required": REQUIRED, "controls": CONTROLS}

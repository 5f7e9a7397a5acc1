"""The composer's errors in words a person reads (web/form_words.py); composer.js words the JSON
API's errors by the same rules (tests/browser/test_chat_keyboard.py sees them on the page)."""

from __future__ import annotations

import pytest

from responses_app.forms import MAX_INPUT_CHARS
from responses_app.web.form_words import error_lines, for_people


@pytest.mark.parametrize(("field", "message", "words"), [
    ("input", "This field is required.", "Write a message first."),
    ("model", "This field is required.", "Choose a model."),
    ("input", f"input takes at most {MAX_INPUT_CHARS} characters.",
     f"Your message takes at most {MAX_INPUT_CHARS} characters."),
    ("metadata", "metadata is not valid JSON.", "The metadata (under Advanced) is not valid JSON."),
    ("model", "must be a string, not int.", "The model must be a string, not int."),
    ("model", "Choose a model.", "Choose a model."),
    ("request", "Too many requests: try again in 3 s.", "Too many requests: try again in 3 s."),
])
def test_an_error_reads_as_words_never_as_a_field_name(field: str, message: str, words: str) -> None:
    assert for_people(field, message) == words


def test_every_line_keeps_its_field() -> None:
    lines = error_lines({"input": ["This field is required."], "metadata": ["metadata is not valid JSON."]})
    assert [line["field"] for line in lines] == ["input", "metadata"]
    assert all(not line["text"].startswith(("input", "metadata")) for line in lines)

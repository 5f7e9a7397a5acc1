"""RELAY_SAFETY_PRECHECK: the user's input is judged before the first upstream POST of a logical
request; a flagged input is never sent. Once per logical request: a takeover finds the stored
verdict and follows it, neither checking again nor sending what was blocked.

A checker error or timeout follows the error policy of the request's mode (`safety.policy.fail_closed`):
blocked in `buffered`, let through otherwise, unless RELAY_SAFETY_ON_ERROR says.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import replace
from typing import Any

from .. import selectors
from ..conf import app_settings
from ..models import ResponseRequest, SafetyVerdict
from ..safety.audit import verdict_record
from ..safety.checkers import checker_from_settings, judge
from ..safety.policy import fail_closed, mode_for
from ..selectors import RunRequest
from ..streaming.vocabulary import INPUT_FLAGGED
from .dbthreads import db

Action = SafetyVerdict.Action


# Keys whose values are not text a person or a model wrote: kinds, ids, states and references.
STRUCTURAL_KEYS = frozenset({"type", "role", "id", "call_id", "status", "detail", "format", "file_id", "image_url",
                             "file_url", "mime_type", "encrypted_content", "approval_request_id", "server_label"})


def input_text(request: ResponseRequest | RunRequest) -> str:
    """Every text the user sent in this turn, and the instructions: strings anywhere in its input
    items (messages, parts, a function call's `arguments`, an `output`, a reasoning `summary`, a
    file's `filename`), and `file_data` decoded when it is text. Not the keys that only name or
    point (STRUCTURAL_KEYS). A file that is not text cannot be judged: `unreadable_files` says so."""
    texts: list[str] = []

    def collect(value: Any, key: str = "") -> None:
        if isinstance(value, str):
            if key == "file_data":
                decoded = _file_text(value)
                if decoded:
                    texts.append(decoded)
            elif key not in STRUCTURAL_KEYS and value:
                texts.append(value)
        elif isinstance(value, list):
            for item in value:
                collect(item, key)
        elif isinstance(value, dict):
            for name, item in value.items():
                collect(item, str(name))

    collect(request.input)
    instructions = (request.params or {}).get("instructions")
    if isinstance(instructions, str) and instructions:
        texts.append(instructions)
    return "\n".join(texts)


def unreadable_files(request: ResponseRequest | RunRequest) -> int:
    """How many `file_data` parts of the input are not text (a PDF, an image): no checker reads them."""
    found = 0

    def walk(value: Any) -> None:
        nonlocal found
        if isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            data = value.get("file_data")
            if isinstance(data, str) and data and _file_text(data) is None:
                found += 1
            for item in value.values():
                walk(item)

    walk(request.input)
    return found


def _file_text(data: str) -> str | None:
    """A file's content as text: base64 (or a base64 data URL) that decodes to UTF-8; None otherwise."""
    payload = data.split(",", 1)[1] if data.startswith("data:") and "," in data else data
    try:
        raw = base64.b64decode(payload, validate=True)
        return raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def blocked_message(categories: list[str] | tuple[str, ...], error: str) -> str:
    """What the page says after "Not sent" (web/turns.py: ERROR_LABELS["input_flagged"])."""
    if error:
        return (f"The safety check of this message could not be made ({error}), and the safety policy does not "
                "send unchecked messages. Nothing was sent to the model.")
    named = [c for c in categories if not c.startswith("rule:")]  # the rules themselves stay private
    why = f" ({', '.join(named)})" if named else ""
    return f"The safety policy flagged this message{why}. Nothing was sent to the model and no answer was generated."


async def precheck(request: RunRequest) -> tuple[str, str] | None:
    """None to go on; else the request's error (code, message): it fails without any upstream call."""
    if not app_settings.SAFETY_PRECHECK:
        return None
    earlier = await db(selectors.safety_precheck)(request_id=request.pk)
    if earlier is not None:
        return None if earlier.action == Action.PASSED else (INPUT_FLAGGED, blocked_message(earlier.categories,
                                                                                             earlier.error))
    text = input_text(request)
    closed = fail_closed(mode_for(request.model))
    verdict = await judge(checker_from_settings(), text, kind="input", timeout=app_settings.SAFETY_TIMEOUT_MS / 1000,
                          fail_closed=closed)
    unreadable = unreadable_files(request)
    if unreadable and not verdict.flagged and closed:  # what no checker read is not let through unchecked
        verdict = replace(verdict, flagged=True, error=f"{unreadable} attached file(s) are not text a checker reads")
    await db(verdict_record)(request_id=request.pk, mode="precheck", kind="input", verdict=verdict, text=text,
                             action=Action.INPUT_BLOCKED if verdict.flagged else Action.PASSED, end=len(text))
    return (INPUT_FLAGGED, blocked_message(verdict.categories, verdict.error)) if verdict.flagged else None

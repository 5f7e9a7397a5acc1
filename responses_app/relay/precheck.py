"""RELAY_SAFETY_PRECHECK: the user's input is judged before the first upstream POST of a logical
request; a flagged input is never sent. Once per logical request: a takeover finds the stored
verdict and follows it, neither checking again nor sending what was blocked.

A checker error or timeout follows the error policy of the request's mode (`safety.policy.fail_closed`):
blocked in `buffered`, let through otherwise, unless RELAY_SAFETY_ON_ERROR says.
"""

from __future__ import annotations

from typing import Any

from .. import selectors
from ..conf import app_settings
from ..models import ResponseRequest, SafetyVerdict
from ..safety.audit import verdict_record
from ..safety.checkers import checker_from_settings, judge
from ..safety.policy import fail_closed, mode_for
from ..selectors import RunRequest
from .dbthreads import db

INPUT_FLAGGED = "input_flagged"
Action = SafetyVerdict.Action


def input_text(request: ResponseRequest | RunRequest) -> str:
    """Every text the user sent in this turn (a string, messages, `input_text` parts), and the instructions."""
    texts: list[str] = []

    def collect(value: Any) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            for item in value:
                collect(item)
        elif isinstance(value, dict):
            if isinstance(value.get("text"), str):
                texts.append(value["text"])
            collect(value.get("content"))

    collect(request.input)
    instructions = (request.params or {}).get("instructions")
    if isinstance(instructions, str) and instructions:
        texts.append(instructions)
    return "\n".join(texts)


def blocked_message(categories: list[str] | tuple[str, ...], error: str) -> str:
    """What the page says after "Not sent" (relay_tags.ERROR_LABELS["input_flagged"])."""
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
    verdict = await judge(checker_from_settings(), text, kind="input", timeout=app_settings.SAFETY_TIMEOUT_MS / 1000,
                          fail_closed=fail_closed(mode_for(request.model)))
    await db(verdict_record)(request_id=request.pk, mode="precheck", kind="input", verdict=verdict, text=text,
                             action=Action.INPUT_BLOCKED if verdict.flagged else Action.PASSED, end=len(text))
    return (INPUT_FLAGGED, blocked_message(verdict.categories, verdict.error)) if verdict.flagged else None

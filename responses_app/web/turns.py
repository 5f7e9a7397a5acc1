"""A turn as the pages show it: its honest badge and the words for it, the line under an ended
answer, and the context the turn partial (`responses_app/_turn.html`) is rendered with.

The template tags (`{% load relay %}`, `relay_tags`) register these; the pages, the shared pages and
`{% relay_response %}` build a turn with `turn_context`. What the browser's script still decides
itself (the badge of a live turn) it words with `vocabulary()`, handed over with `json_script`.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from .. import attachments, continuing, forms, pricing
from ..blockwords import DONE_STATES
from ..branches import Versions
from ..models import AnswerFeedback, ResponseRequest
from ..streaming.vocabulary import ENDED_STATUSES, PENDING
from . import form_words

BADGE_LABELS = {
    "queued": "Queued",
    "retrying": "Retrying ({status}, {attempt} of {of})…",  # filled from the view's meta.retry
    "in_progress": "In progress",
    "thinking": "Thinking…",
    "searching": "Searching…",
    "waiting_tool": "Waiting for tool",
    "waiting_approval": "Waiting for your approval",
    "working": "Using a tool…",
    # One word and colour per outcome, as the admin tells them apart: the model provider reported
    # a failure (failed), the relay could not get an answer (error), someone pressed Stop.
    "completed": "Completed",
    "failed": "Failed",
    "error": "Error",
    "incomplete": "Incomplete",
    "cancelled": "Stopped",
    "unknown": "Unknown outcome",
}
# An ended request's badge: its status.
TERMINAL_BADGES = {status: status for status in sorted(ENDED_STATUSES)}
# How an ended turn's error code and incomplete reason read (an unknown code reads as itself, an
# unknown reason as "Stopped early: <reason>"): the safety policy's outcomes say what happened.
ERROR_LABELS = {
    "input_flagged": "Not sent",  # RELAY_SAFETY_PRECHECK: no upstream request was made
    "outcome_unknown": "Connection lost",  # the stream broke off and nobody can say how it ended
    "upstream_connection_lost": "Connection lost",  # the provider ended the response with its connection
}
# "<reason>:<notice state>" words the line as the safety notice in the view stands (see reason_key).
REASON_SENTENCES = {
    "content_filter": "Part of this answer was withheld by the safety policy.",
    "content_filter:retracted": "Part of this answer was retracted by the safety policy.",
    "max_output_items": "The answer had more parts than this server shows; the rest was dropped.",
    "max_answer_chars": "The answer was longer than this server keeps; the rest was dropped.",
}
_CALLER_TOOLS = frozenset({"function_call", "custom_tool_call"})
_VISIBLE = frozenset({"text", "refusal", "image", "audio"})


def vocabulary() -> dict[str, Any]:
    """What the browser needs to tell a live turn's state as `badge_key` does, and to word it."""
    return {
        "labels": BADGE_LABELS,
        "terminal_badges": TERMINAL_BADGES,
        "ended": sorted(ENDED_STATUSES),
        "pending": PENDING,
        "caller_tools": sorted(_CALLER_TOOLS),
        "done_states": sorted(DONE_STATES),
        "visible_kinds": sorted(_VISIBLE),
        "form": form_words.vocabulary(),  # the composer's errors in words (form_words.for_people)
    }


def badge_key(status: str, view: dict[str, Any] | None) -> str:
    """The honest state of a request for people: the same rules as `badgeKey` in state.js."""
    if status in TERMINAL_BADGES:
        return TERMINAL_BADGES[status]
    if status == PENDING:
        return "queued"
    view = view or {}
    meta_status = (view.get("meta") or {}).get("status")
    if meta_status in TERMINAL_BADGES:
        return TERMINAL_BADGES[meta_status]
    if (view.get("meta") or {}).get("retry"):
        return "retrying"
    if meta_status == "queued":
        return "queued"
    if meta_status == "waiting_for_approval":
        return "waiting_approval"
    blocks = view.get("blocks") or []
    if any(b.get("kind") == "tool" and b.get("state") == "searching" for b in blocks):
        return "searching"
    last = blocks[-1] if blocks else None
    if last and last.get("kind") == "tool" and last.get("tool") in _CALLER_TOOLS and last.get("state") in DONE_STATES:
        return "waiting_tool"
    if (view.get("meta") or {}).get("activity") == "tool" and last and last.get("kind") == "tool" \
            and last.get("state") not in DONE_STATES:
        return "working"  # no text for a while, but a tool runs and events flow
    visible = any(b.get("kind") in _VISIBLE and b.get("text") for b in blocks)
    if not visible or (last and last.get("kind") == "reasoning"):
        return "thinking"
    return "in_progress"


def badge_is_final(key: str) -> bool:
    return key in TERMINAL_BADGES.values()


def reason_key(reason: str, view: dict[str, Any] | None) -> str:
    """The incomplete reason, refined by the safety notice's state when the view holds one and a
    sentence says it ("content_filter:retracted"): the line and the notice say the same thing."""
    for block in (view or {}).get("blocks") or []:
        if block.get("kind") == "compaction" and block.get("tool") == "content_filter":
            key = f"{reason}:{block.get('state')}"
            return key if key in REASON_SENTENCES else reason
    return reason


def turn_notice(error: dict[str, Any] | None, incomplete_reason: str = "",
                view: dict[str, Any] | None = None) -> SafeString:
    """The line under an ended answer: its error, and why it stopped early (worded as the view's
    safety notice stands)."""
    parts = []
    if error:
        code = str(error.get("code") or "")
        label = ERROR_LABELS.get(code, code or "error")
        message = str(error.get("message") or "")
        parts.append(format_html("<strong>{}</strong>{}", label, f": {message}" if message else ""))
    if incomplete_reason:
        key = reason_key(incomplete_reason, view)
        parts.append(escape(REASON_SENTENCES.get(key, f"Stopped early: {incomplete_reason}")))
    return mark_safe(" ".join(parts))  # noqa: S308 - every part is escaped above


_FIELD = re.compile(r"\{(\w+)\}")


def badge_text(key: str, view: dict[str, Any] | None = None) -> str:
    """The badge's words, "Retrying (429, 2 of 3)…" filled from the view's meta.retry."""
    retry = ((view or {}).get("meta") or {}).get("retry") or {}
    retry = retry if isinstance(retry, dict) else {}
    return _FIELD.sub(lambda m: str(retry.get(m.group(1), "?")), BADGE_LABELS.get(key, key))


def _thought_s(request: ResponseRequest, view: dict[str, Any]) -> int | None:
    """Seconds from the request to its first visible text, when it reasoned first."""
    if request.first_text_at is None or not any(b.get("kind") == "reasoning" for b in view.get("blocks") or []):
        return None
    return max(0, round((request.first_text_at - request.created).total_seconds()))


def turn_context(request: ResponseRequest, view: dict[str, Any], *, can_post: bool = False,
                 can_cancel: bool | None = None, versions: Versions | None = None,
                 feedback: AnswerFeedback | None = None, head: ResponseRequest | None = None,
                 earlier: dict[str, Any] | None = None, last: bool = False,
                 model_choices: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """`can_cancel`: Stop is offered (the owner's, or a viewer with change_responserequest);
    `versions`: the turn's place among its versions (`‹ 2/3 ›`, branches.py); `feedback`: the
    owner's rating of the answer (feedback.py). A turn with continuations (continuing.py):
    `request` is its last part, `head` its first (the prompt, the turn's name, Regenerate and
    Edit), `earlier` the answer before a live last part; `last`: nothing follows it (Continue is
    offered then). `model_choices`: what Regenerate may use instead, each (model, description)."""
    live = not request.is_terminal and request.status != ResponseRequest.Status.UNKNOWN
    badge = badge_key(request.status, view)
    usage = request.usage or (view.get("meta") or {}).get("usage")
    meta = view.get("meta") or {}
    error = None
    if request.error_code or request.error_message:
        error = {"code": request.error_code, "message": request.error_message}
    elif isinstance(meta.get("error"), dict):
        error = meta["error"]
    return {
        "request": request,
        "view": view,
        "live": live,
        "badge": badge,
        # no Stop beside a known outcome, nor to a viewer who may not stop it
        "show_stop": live and not badge_is_final(badge) and (can_post if can_cancel is None else can_cancel),
        "error": error,
        "incomplete_reason": request.incomplete_reason or meta.get("incomplete_reason") or "",
        "usage": usage,
        "cost": pricing.cost_of(usage, request.model),
        "thought_s": _thought_s(request, view),
        "can_post": can_post,
        "feedback": feedback,
        "regenerate_id": str(uuid.uuid4()),  # fresh per render: idempotency keys, as the composer's
        "resend_id": str(uuid.uuid4()),
        "versions": versions,
        "head": head or request,
        "earlier": earlier,
        "earlier_markdown": markdown_source(earlier) if earlier else "",
        "can_continue": can_post and not live and continuing.offered(request, last=last),
        "continue_id": str(uuid.uuid4()),
        "model_choices": (model_choices or []) if can_post else [],
        "regenerate_model_id": str(uuid.uuid4()),
        "markdown_source": markdown_source(continuing.join_views([earlier, view]) if earlier else view),
        "max_input_chars": forms.MAX_INPUT_CHARS,
        "attachments": attachments.of_turn(head or request),  # images and files sent with the prompt
    }


def markdown_source(view: dict[str, Any]) -> str:
    """What Copy puts on the clipboard for an answer: its text, as the model wrote it (Markdown)."""
    return "\n\n".join(b["text"] for b in view.get("blocks") or () if b.get("kind") == "text" and b.get("text"))


def turn_context_of(turn: continuing.Turn, **kwargs: Any) -> dict[str, Any]:
    """`turn_context` for a turn as continuing.conversation_turns and turn_of read it."""
    return turn_context(turn.request, turn.view, versions=turn.versions, head=turn.head, earlier=turn.earlier,
                        last=turn.last, **kwargs)

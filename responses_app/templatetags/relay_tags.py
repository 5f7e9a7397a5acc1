"""Template helpers for the chat pages: safe Markdown, honest status badges, block rendering
details (reasoning groups, citations, tool activity, images), relative times and token usage.

Every block kind's markup is one template, `responses_app/blocks/<kind>.html` (`block_templates`
picks it); the page's script asks the server to render the blocks of a live answer
(views_render.py) and only appends text and changes state. What the script still decides itself
(the badge of a live turn) it words with `vocabulary()`, handed over with `json_script`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.html import escape, format_html, json_script
from django.utils.safestring import SafeString, mark_safe

from .. import markdown as md
from ..blockwords import (
    DONE_STATES,
    citations,
    code_outputs,
    group_blocks,
    image_field,
    image_src,
    notice_sentence,
    tool_details,
    tool_state,
    tool_title,
)
from ..streaming.vocabulary import ENDED_STATUSES, PENDING

register = template.Library()

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
    }


@register.simple_tag
def relay_vocabulary() -> SafeString:
    return json_script(vocabulary(), "relay-vocabulary")


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


@register.simple_tag(takes_context=True)
def render_turn(context: template.Context, turn: dict[str, Any]) -> SafeString:
    """One turn (`views.turn_context`), rendered as the turn partial renders it on its own."""
    return render_to_string("responses_app/_turn.html", turn, request=context.get("request"))


@register.filter
def markdown(text: str) -> SafeString:
    return md.render(text or "")


@register.simple_tag
def block_markdown(block: dict[str, Any], live: bool = False) -> SafeString:
    """A block's text as Markdown; while the answer is live and the block still grows, without
    half-built syntax on its last line."""
    return md.render(block.get("text") or "", partial=bool(live) and block.get("state") not in DONE_STATES)


@register.filter
def block_templates(block: dict[str, Any]) -> list[str]:
    """The template of a block's kind: `responses_app/blocks/<kind>.html`, the safety policy's
    notice its own, anything without a template of its own read as a tool."""
    kind = str(block.get("kind") or "tool")
    if kind == "compaction" and block.get("tool") == "content_filter":
        kind = "notice"
    own = [f"responses_app/blocks/{kind}.html"] if kind.isidentifier() else []  # never a path
    return [*own, "responses_app/blocks/tool.html"]


def reason_key(reason: str, view: dict[str, Any] | None) -> str:
    """The incomplete reason, refined by the safety notice's state when the view holds one and a
    sentence says it ("content_filter:retracted"): the line and the notice say the same thing."""
    for block in (view or {}).get("blocks") or []:
        if block.get("kind") == "compaction" and block.get("tool") == "content_filter":
            key = f"{reason}:{block.get('state')}"
            return key if key in REASON_SENTENCES else reason
    return reason


@register.simple_tag
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


@register.filter
def badge_label(key: str) -> str:
    return BADGE_LABELS.get(key, key)


_FIELD = re.compile(r"\{(\w+)\}")


@register.simple_tag
def badge_text(key: str, view: dict[str, Any] | None = None) -> str:
    """The badge's words, "Retrying (429, 2 of 3)…" filled from the view's meta.retry."""
    retry = ((view or {}).get("meta") or {}).get("retry") or {}
    retry = retry if isinstance(retry, dict) else {}
    return _FIELD.sub(lambda m: str(retry.get(m.group(1), "?")), BADGE_LABELS.get(key, key))


for _filter in (citations, code_outputs, group_blocks, image_field, image_src, notice_sentence, tool_details,
                tool_state, tool_title):
    register.filter(_filter.__name__, _filter)


@register.filter
def prompt_html(text: str) -> SafeString:
    """What the user typed: escaped, line breaks kept, nothing else."""
    return mark_safe(escape(text or "").replace("\n", "<br>"))  # noqa: S308 - escaped


# --- times and usage ------------------------------------------------------------------------

def ago_text(moment: datetime, now: datetime) -> str:
    seconds = max(0, int((now - moment).total_seconds()))
    if seconds < 45:
        return "just now"
    minutes = round(seconds / 60)
    if minutes < 2:
        return "a minute ago"
    if minutes < 45:
        return f"{minutes} minutes ago"
    hours = round(seconds / 3600)
    if hours < 2:
        return "an hour ago"
    if hours < 22:
        return f"{hours} hours ago"
    days = round(seconds / 86400)
    if days < 2:
        return "yesterday"
    if days < 30:
        return f"{days} days ago"
    return moment.strftime("%-d %b %Y")


@register.filter
def ago(moment: datetime | None) -> str:
    """A relative time that reads naturally: "just now", "5 minutes ago", "yesterday"."""
    return ago_text(moment, timezone.now()) if moment else ""


@register.simple_tag
def usage_line(usage: dict[str, Any] | None, cost: float | None = None) -> SafeString:
    """Input (cached), output (reasoning) tokens of one answer, and its cost when priced."""
    if not isinstance(usage, dict) or not usage.get("total_tokens"):
        return mark_safe("")  # noqa: S308 - empty
    parts = [format_html('<span data-usage="input">{} in</span>', usage.get("input_tokens") or 0)]
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
    if cached:
        parts.append(format_html('<span data-usage="cached">{} cached</span>', cached))
    parts.append(format_html('<span data-usage="output">{} out</span>', usage.get("output_tokens") or 0))
    reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
    if reasoning:
        parts.append(format_html('<span data-usage="reasoning">{} reasoning</span>', reasoning))
    if cost is not None:
        parts.append(format_html('<span data-usage="cost">${}</span>', f"{cost:.4f}"))
    return format_html('<span class="usage muted small" title="Tokens used by this answer">{}</span>',
                       mark_safe(" · ".join(parts)))  # noqa: S308 - each part escaped by format_html

"""Template helpers for the chat pages: safe Markdown, honest status badges, block rendering
details (reasoning groups, citations, tool activity, images), relative times and token usage.

Every block kind's markup is one template, `responses_app/blocks/<kind>.html` (`block_templates`
picks it); the page's script asks the server to render the blocks of a live answer
(web/live_blocks.py) and only appends text and changes state. A turn's badge, its words and the
line under it are web/turns.py's: the tags here register them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.html import escape, format_html, json_script
from django.utils.safestring import SafeString, mark_safe

from .. import markdown as md
from .. import pricing
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
from ..web import turns

register = template.Library()


@register.simple_tag
def relay_vocabulary() -> SafeString:
    return json_script(turns.vocabulary(), "relay-vocabulary")


@register.simple_tag(takes_context=True)
def render_turn(context: template.Context, turn: dict[str, Any]) -> SafeString:
    """One turn (`turns.turn_context`), rendered as the turn partial renders it on its own."""
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


@register.filter
def badge_label(key: str) -> str:
    return turns.BADGE_LABELS.get(key, key)


register.simple_tag(turns.turn_notice, name="turn_notice")
register.simple_tag(turns.badge_text, name="badge_text")


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
def usage_line(usage: dict[str, Any] | None, cost: pricing.Cost | None = None) -> SafeString:
    """Input (cached), output (reasoning) tokens of one answer, and its cost when priced (`≈` when
    estimated: a stopped answer's output, its input unknown)."""
    if not isinstance(usage, dict) or not usage.get("total_tokens"):
        return mark_safe("")  # noqa: S308 - empty
    # Estimated (streaming/usage.py): an answer that ended before the provider reported its usage.
    estimated = bool(usage.get("estimated"))
    parts = [] if estimated and "input_tokens" not in usage else [
        format_html('<span data-usage="input">{} in</span>', usage.get("input_tokens") or 0)]
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
    if cached:
        parts.append(format_html('<span data-usage="cached">{} cached</span>', cached))
    parts.append(format_html('<span data-usage="output">{}{} out</span>', "≈ " if estimated else "",
                             usage.get("output_tokens") or 0))
    reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
    if reasoning:
        parts.append(format_html('<span data-usage="reasoning">{} reasoning</span>', reasoning))
    if cost is not None:
        parts.append(format_html('<span data-usage="cost"{}>{}</span>', " data-estimated" if cost.estimated else "",
                                 pricing.cost_text(cost)))
    title = ("Tokens used by this answer, estimated from what it streamed: it ended before the model "
             "provider reported them" if estimated else "Tokens used by this answer")
    if cost is not None:
        unknown_input = estimated and "input_tokens" not in usage
        title += ", and what they cost at this site's prices" + (" (its input not counted)" if unknown_input else "")
    return format_html('<span class="usage muted small" title="{}">{}</span>', title,
                       mark_safe(" · ".join(parts)))  # noqa: S308 - each part escaped by format_html


@register.simple_tag
def cost_total(total: pricing.Total | None) -> str:
    """A total's cost in words (pricing.total_text): empty when nothing was priced."""
    return pricing.total_text(total)

"""Template helpers for the chat pages: safe Markdown, honest status badges, block rendering
details (reasoning groups, citations, tool activity, images), relative times and token usage.

`render.js` in the browser implements the same rules for live answers; the words and status sets
it needs come from `vocabulary()`, handed over with `json_script`, so neither side spells them
out twice. tests/test_render_parity.py holds the two renderers to the same HTML.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import escape, format_html, json_script
from django.utils.safestring import SafeString, mark_safe

from .. import markdown as md
from ..streaming.vocabulary import ENDED_STATUSES, ERROR, FAILED, PENDING

register = template.Library()

BADGE_LABELS = {
    "queued": "Queued",
    "in_progress": "In progress",
    "thinking": "Thinking…",
    "searching": "Searching…",
    "waiting_tool": "Waiting for tool",
    "waiting_approval": "Waiting for your approval",
    "working": "Using a tool…",
    "completed": "Completed",
    "failed": "Failed",
    "incomplete": "Incomplete",
    "cancelled": "Cancelled",
    "unknown": "Unknown outcome",
}
# An ended request's badge: its status, except that a transport error reads as a failure.
TERMINAL_BADGES = {status: FAILED if status == ERROR else status for status in sorted(ENDED_STATUSES)}
# How an ended turn's error code and incomplete reason read (an unknown code reads as itself, an
# unknown reason as "Stopped early: <reason>"): the safety policy's outcomes say what happened.
ERROR_LABELS = {
    "input_flagged": "Not sent",  # RELAY_SAFETY_PRECHECK: no upstream request was made
    "outcome_unknown": "Connection lost",  # the stream broke off and nobody can say how it ended
}
# "<reason>:<notice state>" words the line as the safety notice in the view stands (see reason_key).
REASON_SENTENCES = {
    "content_filter": "Part of this answer was withheld by the safety policy.",
    "content_filter:retracted": "Part of this answer was retracted by the safety policy.",
    "max_output_items": "The answer had more parts than this server shows; the rest was dropped.",
}
# The safety policy's notice (streaming/safety.py), where the answer was stopped: the turn's
# incomplete reason already says that part was withheld; the notice says where, and how.
NOTICE_SENTENCES = {
    "withheld": "The rest of this answer was withheld by the safety policy.",
    "retracted": "The rest of this answer was retracted by the safety policy.",
}
_CALLER_TOOLS = frozenset({"function_call", "custom_tool_call"})
_DONE_STATES = frozenset({"completed", "done"})
_VISIBLE = frozenset({"text", "refusal", "image", "audio"})

# One word per tool state, whichever event or item status it came from ("done" from a part's end,
# "interpreting" from code interpreter ...): what people read, and the CSS class.
TOOL_STATES = {
    "in_progress": "running", "streaming": "running", "interpreting": "running", "calling": "running",
    "searching": "searching", "generating": "generating",
    "completed": "completed", "done": "completed",
    "failed": "failed", "incomplete": "incomplete", "cancelled": "cancelled",
    "awaiting_approval": "awaiting approval", "approved": "approved", "denied": "denied",
    "withheld": "withheld", "retracted": "retracted",  # the safety policy's notice
}

TOOL_NAMES = {
    "web_search_call": "Web search",
    "file_search_call": "File search",
    "function_call": "Function call",
    "custom_tool_call": "Tool call",
    "code_interpreter_call": "Code interpreter",
    "image_generation_call": "Image generation",
    "mcp_call": "MCP call",
    "mcp_list_tools": "MCP tools list",
    "mcp_approval_request": "MCP approval request",
    "computer_call": "Computer use",
    "local_shell_call": "Shell",
    "shell_call": "Shell",
    "apply_patch_call": "Patch",
    # The safety policy's notice (streaming/safety.py): a compaction-kind block in place of the text.
    "content_filter": "Part of this answer was withheld by the safety policy",
}


def vocabulary() -> dict[str, Any]:
    """Everything the browser's renderer needs to word a view exactly as the templates do."""
    return {
        "labels": BADGE_LABELS,
        "terminal_badges": TERMINAL_BADGES,
        "ended": sorted(ENDED_STATUSES),
        "pending": PENDING,
        "caller_tools": sorted(_CALLER_TOOLS),
        "done_states": sorted(_DONE_STATES),
        "visible_kinds": sorted(_VISIBLE),
        "tool_states": TOOL_STATES,
        "tool_names": TOOL_NAMES,
        "error_labels": ERROR_LABELS,
        "reason_sentences": REASON_SENTENCES,
        "notice_sentences": NOTICE_SENTENCES,
    }


@register.simple_tag
def relay_vocabulary() -> SafeString:
    return json_script(vocabulary(), "relay-vocabulary")


def badge_key(status: str, view: dict[str, Any] | None) -> str:
    """The honest state of a request for people: the same rules as `badgeKey` in render.js."""
    if status in TERMINAL_BADGES:
        return TERMINAL_BADGES[status]
    if status == PENDING:
        return "queued"
    view = view or {}
    meta_status = (view.get("meta") or {}).get("status")
    if meta_status in TERMINAL_BADGES:
        return TERMINAL_BADGES[meta_status]
    if meta_status == "queued":
        return "queued"
    if meta_status == "waiting_for_approval":
        return "waiting_approval"
    blocks = view.get("blocks") or []
    if any(b.get("kind") == "tool" and b.get("state") == "searching" for b in blocks):
        return "searching"
    last = blocks[-1] if blocks else None
    if last and last.get("kind") == "tool" and last.get("tool") in _CALLER_TOOLS and last.get("state") in _DONE_STATES:
        return "waiting_tool"
    if (view.get("meta") or {}).get("activity") == "tool" and last and last.get("kind") == "tool" \
            and last.get("state") not in _DONE_STATES:
        return "working"  # no text for a while, but a tool runs and events flow
    visible = any(b.get("kind") in _VISIBLE and b.get("text") for b in blocks)
    if not visible or (last and last.get("kind") == "reasoning"):
        return "thinking"
    return "in_progress"


def badge_is_final(key: str) -> bool:
    return key in TERMINAL_BADGES.values()


@register.filter
def markdown(text: str) -> SafeString:
    return md.render(text or "")


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
    safety notice stands); `noticeHtml` in render.js."""
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


@register.filter
def tool_state(state: str) -> str:
    return TOOL_STATES.get(state or "", state or "")


def _is_reasoning_item(block: dict[str, Any]) -> bool:
    return block.get("kind") == "reasoning" and block.get("tool") == "reasoning"


@register.filter
def group_blocks(blocks: list[dict[str, Any]], thought_s: int | None = None) -> list[dict[str, Any]]:
    """Blocks in reading order, with each reasoning item's summary parts inside it (one
    collapsible per item, titled "Thought for N s" once its time is known)."""
    out: list[dict[str, Any]] = []
    items: dict[str, dict[str, Any]] = {}
    for block in blocks or []:
        if _is_reasoning_item(block):
            entry = dict(block, parts=[])
            items[str(block.get("item_id") or block.get("id"))] = entry
            out.append(entry)
        elif block.get("kind") == "reasoning":
            owner = items.get(str(block.get("item_id")))
            if owner is None:  # a part whose item block is missing: a group of its own
                owner = {"id": f"group-{block.get('id')}", "kind": "reasoning", "tool": "reasoning",
                         "item_id": block.get("item_id"), "state": block.get("state"), "parts": []}
                items[str(block.get("item_id"))] = owner
                out.append(owner)
            owner["parts"].append(block)
        else:
            out.append(block)
    first = True
    for entry in out:
        if entry.get("kind") == "reasoning":
            entry["title"] = reasoning_title(entry, thought_s if first else None)
            first = False
    return out


def reasoning_title(item: dict[str, Any], thought_s: int | None) -> str:
    if item.get("state") not in _DONE_STATES and item.get("state") not in ("incomplete", "failed"):
        return "Thinking…"
    if thought_s is not None:
        return f"Thought for {thought_s} s"
    return "Thought"


@register.filter
def citations(block: dict[str, Any]) -> list[dict[str, str]]:
    """url_citation annotations as {title, url} (http/https only, once each); file_citation as
    {filename}."""
    seen: set[str] = set()
    found: list[dict[str, str]] = []
    for note in block.get("annotations") or []:
        if not isinstance(note, dict):
            continue
        if note.get("type") == "url_citation":
            url = md.safe_url(note.get("url"))
            if url and url not in seen:
                seen.add(url)
                found.append({"kind": "url", "url": url, "title": str(note.get("title") or url)})
        elif note.get("type") in ("file_citation", "container_file_citation"):
            name = str(note.get("filename") or note.get("file_id") or "file")
            if name not in seen:
                seen.add(name)
                found.append({"kind": "file", "title": name})
    return found


@register.filter
def notice_sentence(block: dict[str, Any]) -> str:
    """The safety notice's words (the same rule as `noticeSentence` in render.js)."""
    return NOTICE_SENTENCES.get(str(block.get("state")), NOTICE_SENTENCES["withheld"])


@register.filter
def tool_title(block: dict[str, Any]) -> str:
    """What the tool did, in words: `Web search: "query"`, `Function call get_weather` ..."""
    tool = str(block.get("tool") or "tool")
    title = TOOL_NAMES.get(tool, tool.replace("_", " ").capitalize())
    if block.get("name"):
        title += f" {block['server_label']}.{block['name']}" if block.get("server_label") else f" {block['name']}"
    if block.get("query"):
        title += f": “{block['query']}”"
    elif block.get("queries"):
        title += ": " + ", ".join(f"“{q}”" for q in block["queries"][:3])
    return title


@register.filter
def tool_details(block: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs worth showing under a tool call: arguments, output, commands ..."""
    details = []
    for key in ("arguments", "input", "commands", "output", "result", "outputs", "operation", "error"):
        value = block.get(key)
        if value in (None, "", [], {}):
            continue
        if key == "result" and image_src(block):
            continue  # an image's base64 is shown as the image
        if isinstance(value, str):
            try:
                value = json.dumps(json.loads(value), indent=2, ensure_ascii=False)
            except ValueError:
                pass
        else:
            value = json.dumps(value, indent=2, ensure_ascii=False)
        details.append((key, value))
    return details


_B64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")
_IMAGE_PREFIXES = (("iVBOR", "image/png"), ("/9j/", "image/jpeg"), ("UklGR", "image/webp"), ("R0lGOD", "image/gif"))


@register.filter
def image_src(block: dict[str, Any]) -> str:
    """A data: URL for a generated image, only when it is plain base64 image data (the same rule
    as `imageSrc` in render.js): the final image once there is one, else the latest partial (the
    block keeps its last partial after the final arrives)."""
    data = block.get("result") or block.get("image_b64")
    if not isinstance(data, str) or not data or len(data) > 8_000_000 or not _B64.match(data):
        return ""
    mime = next((m for prefix, m in _IMAGE_PREFIXES if data.startswith(prefix)), "")
    return f"data:{mime};base64,{data}" if mime else ""


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

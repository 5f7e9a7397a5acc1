"""Template helpers for the chat pages: safe Markdown, honest status badges, block rendering
details (citations, tool activity) and small inline SVG charts for the analytics page."""

from __future__ import annotations

import json
import re
from typing import Any

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from .. import markdown as md

register = template.Library()

BADGE_LABELS = {
    "queued": "Queued",
    "in_progress": "In progress",
    "thinking": "Thinking…",
    "searching": "Searching…",
    "waiting_tool": "Waiting for tool",
    "completed": "Completed",
    "failed": "Failed",
    "incomplete": "Incomplete",
    "cancelled": "Cancelled",
    "unknown": "Unknown outcome",
}
_TERMINAL_BADGES = {"completed": "completed", "failed": "failed", "error": "failed",
                    "incomplete": "incomplete", "cancelled": "cancelled", "unknown": "unknown"}
_CALLER_TOOLS = frozenset({"function_call", "custom_tool_call"})
_DONE_STATES = frozenset({"completed", "done"})
_VISIBLE = frozenset({"text", "refusal", "image", "audio"})


def badge_key(status: str, view: dict[str, Any] | None) -> str:
    """The honest state of a request for people: the same rules as `badgeKey` in chat.js."""
    if status in _TERMINAL_BADGES:
        return _TERMINAL_BADGES[status]
    if status == "pending":
        return "queued"
    view = view or {}
    meta_status = (view.get("meta") or {}).get("status")
    if meta_status in _TERMINAL_BADGES:
        return _TERMINAL_BADGES[meta_status]
    if meta_status == "queued":
        return "queued"
    blocks = view.get("blocks") or []
    if any(b.get("kind") == "tool" and b.get("state") == "searching" for b in blocks):
        return "searching"
    last = blocks[-1] if blocks else None
    if last and last.get("kind") == "tool" and last.get("tool") in _CALLER_TOOLS and last.get("state") in _DONE_STATES:
        return "waiting_tool"
    visible = any(b.get("kind") in _VISIBLE and b.get("text") for b in blocks)
    if not visible or (last and last.get("kind") == "reasoning"):
        return "thinking"
    return "in_progress"


@register.filter
def markdown(text: str) -> SafeString:
    return md.render(text or "")


@register.simple_tag
def status_badge(status: str, view: dict[str, Any] | None = None) -> SafeString:
    key = badge_key(status, view)
    return format_html('<span class="badge badge-{}" data-badge="{}">{}</span>', key, key, BADGE_LABELS[key])


@register.filter
def badge_label(key: str) -> str:
    return BADGE_LABELS.get(key, key)


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


_TOOL_NAMES = {
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
}


@register.filter
def tool_title(block: dict[str, Any]) -> str:
    """What the tool did, in words: `Web search: "query"`, `Function call get_weather` ..."""
    tool = str(block.get("tool") or "tool")
    title = _TOOL_NAMES.get(tool, tool.replace("_", " ").capitalize())
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
    """A data: URL for a (partial) generated image, only when it is plain base64 image data
    (the same rule as `imageSrc` in chat.js)."""
    data = block.get("image_b64") or block.get("result")
    if not isinstance(data, str) or not data or len(data) > 8_000_000 or not _B64.match(data):
        return ""
    mime = next((m for prefix, m in _IMAGE_PREFIXES if data.startswith(prefix)), "")
    return f"data:{mime};base64,{data}" if mime else ""


_REASONING_TITLE = re.compile(r"^\s*\*\*(.+?)\*\*")


@register.filter
def reasoning_title(text: str) -> str:
    """`Reasoning · Planning the answer` from a summary that starts with a bold title."""
    match = _REASONING_TITLE.match(text or "")
    return f"Reasoning · {match.group(1)}" if match else "Reasoning summary"


@register.filter
def prompt_html(text: str) -> SafeString:
    """What the user typed: escaped, line breaks kept, nothing else."""
    return mark_safe(escape(text or "").replace("\n", "<br>"))  # noqa: S308 - escaped


# --- charts -----------------------------------------------------------------------------------

PALETTE = {
    "completed": "#16a34a", "failed": "#dc2626", "error": "#b91c1c", "incomplete": "#d97706",
    "cancelled": "#6b7280", "unknown": "#7c3aed", "streaming": "#2563eb", "pending": "#94a3b8",
}
_SERIES = ["#2563eb", "#16a34a", "#d97706", "#7c3aed", "#dc2626", "#0891b2", "#db2777", "#65a30d"]


def series_color(name: str, index: int) -> str:
    return PALETTE.get(name, _SERIES[index % len(_SERIES)])


@register.simple_tag
def stacked_bars(days: list[dict[str, Any]], keys: list[str], title: str = "") -> SafeString:
    """Stacked bars per day: `days` = [{"day": date, "counts": {key: n}}], one colour per key."""
    width, height, pad_left, pad_bottom = 640, 180, 32, 22
    top = max([sum(d["counts"].values()) for d in days] + [1])
    inner_w, inner_h = width - pad_left - 4, height - pad_bottom - 8
    slot = inner_w / max(len(days), 1)
    bar = max(min(slot * 0.7, 36), 2)
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">']
    for frac in (0, 0.5, 1):
        y = 8 + inner_h * (1 - frac)
        parts.append(f'<line x1="{pad_left}" x2="{width - 4}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                     f'<text x="{pad_left - 4}" y="{y + 4:.1f}" class="axis" text-anchor="end">'
                     f"{round(top * frac)}</text>")
    label_every = max(1, len(days) // 8)
    for i, day in enumerate(days):
        x = pad_left + slot * i + (slot - bar) / 2
        y = 8 + inner_h
        for k, key in enumerate(keys):
            n = day["counts"].get(key, 0)
            if not n:
                continue
            h = inner_h * n / top
            y -= h
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                         f'fill="{series_color(key, k)}"><title>{escape(day["day"])} · {escape(key)}: {n}'
                         f"</title></rect>")
        if i % label_every == 0:
            parts.append(f'<text x="{x + bar / 2:.1f}" y="{height - 6}" class="axis" text-anchor="middle">'
                         f'{day["day"].strftime("%m-%d")}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - numbers and escaped labels only


@register.simple_tag
def hbars(rows: list[tuple[str, float]], unit: str = "", title: str = "", width: int = 640,
          label_w: int = 150) -> SafeString:
    """Horizontal bars: [(label, value)]."""
    row_h = 26
    height = row_h * max(len(rows), 1) + 6
    top = max([v for _, v in rows] + [1])
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">']
    for i, (label, value) in enumerate(rows):
        y = 4 + i * row_h
        w = (width - label_w - 90) * (value / top)
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 16}" class="axis" text-anchor="end">{escape(label)}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{max(w, 1):.1f}" height="{row_h - 8}" rx="3" '
            f'fill="{series_color(label, i)}"/>'
            f'<text x="{label_w + max(w, 1) + 6:.1f}" y="{y + 16}" class="value">{value:,.0f}{escape(unit)}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - numbers and escaped labels only


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.simple_tag
def latency_bars(p: dict[str, Any]) -> SafeString:
    rows = [(key, float(p[key])) for key in ("p50", "p90", "p99") if p.get(key) is not None]
    if not rows:
        return format_html('<p class="muted small">{}</p>', "No samples yet.")
    return hbars(rows, " ms", "Percentiles", width=340, label_w=40)

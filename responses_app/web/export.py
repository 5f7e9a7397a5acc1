"""A conversation taken out: the branch shown, each turn's committed view (what every tab shows;
text a safety policy withheld is in no view), as Markdown to read, paste or print, and as JSON
to keep or process. Reads only; who may export is the view's business (the owner only).

The Markdown's structure (the title, each turn's `## You` and `## Assistant` headings, tool
lines, sources) is the export's own: what a user or a model wrote cannot forge it. Their text is
quoted (`> ` on every line: no heading of theirs is at the top level); raw HTML in it is escaped
outside code (no `</blockquote>` closes the quote in a renderer that passes HTML); a link of
theirs stays a link only to an http(s) address, as on the page. Words of theirs inside the
export's own lines (a title, a model name, a citation's title, an error) are escaped as text, and
a citation links only its http(s) URL (blockwords.citations), percent-encoded where Markdown
would end it.
"""

from __future__ import annotations

import re
from typing import Any

from django.utils import timezone

from .. import continuing
from ..blockwords import citations, group_blocks, notice_sentence, tool_details, tool_state, tool_title
from ..models import Conversation, ResponseRequest

FORMAT = "responses-relay.conversation/1"


def _error(request: ResponseRequest, view: dict[str, Any]) -> dict[str, Any] | None:
    meta = view.get("meta") or {}
    if request.error_code or request.error_message:
        return {"code": request.error_code, "message": request.error_message}
    return meta["error"] if isinstance(meta.get("error"), dict) else None


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    turns = []
    for turn in continuing.conversation_turns(conversation=conversation):
        request, view, versions, head = turn.request, turn.view, turn.versions, turn.head
        turns.append({
            "id": str(head.pk),
            "created": head.created.isoformat(),
            "model": request.model,
            "status": request.status,
            "input": head.input,
            "answer": turn.text or answer_text(view),  # a continued answer's parts, joined
            **({"continued_by": [str(part.pk) for part in turn.parts[1:]]} if len(turn.parts) > 1 else {}),
            "view": view,
            "usage": request.usage,
            "error": _error(request, view),
            "incomplete_reason": request.incomplete_reason or (view.get("meta") or {}).get("incomplete_reason") or "",
            "version": {"index": versions.index, "count": versions.count} if versions else {"index": 1, "count": 1},
        })
    return {
        "format": FORMAT,
        "exported_at": timezone.now().isoformat(),
        "conversation": {"id": str(conversation.pk), "title": str(conversation),
                         "created": conversation.created.isoformat(), "updated": conversation.updated.isoformat()},
        "turns": turns,
    }


def answer_text(view: dict[str, Any]) -> str:
    return "\n\n".join(b.get("text") or "" for b in view.get("blocks") or () if b.get("kind") == "text")


def _fence(text: str, info: str = "") -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{info}\n{text}\n{fence}"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())


# --- their words in the export's Markdown --------------------------------------------------------

_INLINE_SPECIAL = re.compile(r"[\\`*\[\]<>&~|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_URL_UNSAFE = re.compile(r"[\x00-\x20\x7f<>()\[\]\\`\"']")


def _inline(text: Any) -> str:
    """Text inside a line of the export: one line, every character that could start Markdown or
    HTML escaped (an underscore inside a word means nothing and stays as is)."""
    return _INLINE_SPECIAL.sub(lambda m: "\\" + m[0], " ".join(str(text).split()))


def _link(title: Any, url: str) -> str:
    """A link to an http(s) `url` (checked by its caller): what would end its destination is
    percent-encoded."""
    return f"[{_inline(title)}]({_URL_UNSAFE.sub(lambda m: f'%{ord(m[0]):02X}', url)})"


_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_TICKS = re.compile(r"`+")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")  # a tag, a comment, a declaration or an autolink
# A link's or an image's destination, or a link reference definition, whose address is not http(s)
# (an entity such as `&#106;avascript:` is decoded in a destination: only the literal prefix counts).
_BAD_DESTINATION = re.compile(r"\]\((?![ \t]*<?[ \t]*https?://)", re.IGNORECASE)
_BAD_DEFINITION = re.compile(r"^( {0,3})\[(?=(?:[^\]\\]|\\.)*\]:(?![ \t]*<?[ \t]*https?://))", re.IGNORECASE)


def _defused(text: str) -> str:
    """A Markdown text of theirs as written, but for raw HTML (escaped) and links to anything but
    http(s) (their bracket escaped, so they read as text), outside code blocks and code spans."""
    out, fence = [], ""
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        opening = _FENCE.match(line)
        if fence:
            out.append(line)
            if opening and opening[1][0] == fence[0] and len(opening[1]) >= len(fence) and \
                    not line[opening.end():].strip():
                fence = ""
            continue
        if opening and not (opening[1][0] == "`" and "`" in line[opening.end():]):
            fence = opening[1]
            out.append(line)
            continue
        out.append(_BAD_DEFINITION.sub(r"\1\\[", _outside_code_spans(line)))
    return "\n".join(out)


def _outside_code_spans(line: str) -> str:
    out, pos = [], 0
    while (run := _TICKS.search(line, pos)) is not None:
        out.append(_plain(line[pos:run.start()]))
        close = re.compile(f"(?<!`){run[0]}(?!`)").search(line, run.end())
        end = close.end() if close else run.end()
        out.append(line[run.start():end])
        pos = end
    out.append(_plain(line[pos:]))
    return "".join(out)


def _plain(text: str) -> str:
    return _BAD_DESTINATION.sub("]\\(", _TAG_START.sub("&lt;", text))


def _theirs(text: str) -> str:
    """A user's or a model's Markdown, quoted and defused: inside the export, never its structure."""
    return _quote(_defused(text)) if text.strip() else ""


def _block(block: dict[str, Any]) -> str:
    kind = block.get("kind")
    if kind == "text":
        out = _theirs(str(block.get("text") or ""))
        sources = [f"{i}. {_link(c['title'], c['url'])}" if c["kind"] == "url" else f"{i}. {_inline(c['title'])}"
                   for i, c in enumerate(citations(block), 1)]
        return out + ("\n\nSources:\n\n" + "\n".join(sources) if sources else "")
    if kind == "refusal":
        return _quote("**Refusal:**\n\n" + _defused(str(block.get("text") or "")))
    if kind == "reasoning":
        parts = "\n\n".join(str(p.get("text")) for p in block.get("parts") or () if p.get("text"))
        return _quote(f"*{_inline(block.get('title') or 'Thought')}*" + (f"\n\n{_defused(parts)}" if parts else ""))
    if kind == "image":
        return f"*Image generation · {_inline(tool_state(block.get('state') or ''))}* (the image is in the JSON export)"
    if kind == "compaction" and block.get("tool") == "content_filter":
        return _quote(f"**{_inline(tool_state(block.get('state') or ''))}:** {_inline(notice_sentence(block))}")
    if kind == "audio":
        return _quote("**Audio transcript:**\n\n" + _defused(str(block.get("text") or "")))
    lines = [f"**{_inline(tool_title(block))}** · {_inline(tool_state(block.get('state') or ''))}"]
    if block.get("text"):
        lines.append(_fence(block["text"]))
    lines.extend(f"{label}:\n\n{_fence(value)}" for label, value in tool_details(block))
    return "\n\n".join(lines)


def conversation_markdown(conversation: Conversation) -> str:
    out = [f"# {_inline(conversation)}", ""]
    for turn in continuing.conversation_turns(conversation=conversation):
        request, view, versions, head = turn.request, turn.view, turn.versions, turn.head
        version = f" · version {versions.index} of {versions.count}" if versions and versions.count > 1 else ""
        out += [f"## You · {timezone.localtime(head.created):%Y-%m-%d %H:%M}{version}", "",
                _theirs(head.prompt_text), ""]
        out += [f"## Assistant · {_inline(request.model)} · {_inline(request.status)}", ""]
        for block in group_blocks(view.get("blocks") or []):
            out += [_block(block), ""]
        error = _error(request, view)
        if error:
            out += [_quote(f"**{_inline(error.get('code') or 'error')}:** {_inline(error.get('message') or '')}"), ""]
    return "\n".join(out).rstrip() + "\n"

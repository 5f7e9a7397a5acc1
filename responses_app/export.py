"""A conversation taken out: the branch shown, each turn's committed view (what every tab shows;
text a safety policy withheld is in no view), as Markdown to read, paste or print, and as JSON
to keep or process. Reads only; who may export is the view's business (the owner only).
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from . import selectors
from .models import Conversation, ResponseRequest
from .templatetags.relay_tags import citations, group_blocks, notice_sentence, tool_details, tool_state, tool_title

FORMAT = "responses-relay.conversation/1"


def _error(request: ResponseRequest, view: dict[str, Any]) -> dict[str, Any] | None:
    meta = view.get("meta") or {}
    if request.error_code or request.error_message:
        return {"code": request.error_code, "message": request.error_message}
    return meta["error"] if isinstance(meta.get("error"), dict) else None


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    turns = []
    for request, view, versions in selectors.conversation_turns(conversation=conversation):
        turns.append({
            "id": str(request.pk),
            "created": request.created.isoformat(),
            "model": request.model,
            "status": request.status,
            "input": request.input,
            "answer": request.final_text or answer_text(view),
            "view": view,
            "usage": request.usage,
            "error": _error(request, view),
            "incomplete_reason": request.incomplete_reason or (view.get("meta") or {}).get("incomplete_reason") or "",
            "version": {"index": versions.index, "count": versions.count},
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


def _block(block: dict[str, Any]) -> str:
    kind = block.get("kind")
    if kind == "text":
        out = block.get("text") or ""
        sources = [f"{i}. [{c['title']}]({c['url']})" if c["kind"] == "url" else f"{i}. {c['title']}"
                   for i, c in enumerate(citations(block), 1)]
        return out + ("\n\nSources:\n\n" + "\n".join(sources) if sources else "")
    if kind == "refusal":
        return _quote(f"**Refusal:** {block.get('text') or ''}")
    if kind == "reasoning":
        parts = "\n\n".join(p.get("text") or "" for p in block.get("parts") or () if p.get("text"))
        return _quote(f"*{block.get('title') or 'Thought'}*" + (f"\n\n{parts}" if parts else ""))
    if kind == "image":
        return f"*Image generation · {tool_state(block.get('state') or '')}* (the image is in the JSON export)"
    if kind == "compaction" and block.get("tool") == "content_filter":
        return _quote(f"**{tool_state(block.get('state') or '')}:** {notice_sentence(block)}")
    if kind == "audio":
        return _quote(f"**Audio transcript:** {block.get('text') or ''}")
    lines = [f"**{tool_title(block)}** · {tool_state(block.get('state') or '')}"]
    if block.get("text"):
        lines.append(_fence(block["text"]))
    lines.extend(f"{label}:\n\n{_fence(value)}" for label, value in tool_details(block))
    return "\n\n".join(lines)


def conversation_markdown(conversation: Conversation) -> str:
    out = [f"# {' '.join(str(conversation).split())}", ""]
    for request, view, versions in selectors.conversation_turns(conversation=conversation):
        version = f" · version {versions.index} of {versions.count}" if versions.count > 1 else ""
        out += [f"## You · {timezone.localtime(request.created):%Y-%m-%d %H:%M}{version}", "", request.prompt_text, ""]
        out += [f"## Assistant · {request.model} · {request.status}", ""]
        for block in group_blocks(view.get("blocks") or []):
            out += [_block(block), ""]
        error = _error(request, view)
        if error:
            out += [_quote(f"**{error.get('code') or 'error'}:** {error.get('message') or ''}"), ""]
    return "\n".join(out).rstrip() + "\n"

"""Safe server-side Markdown for model output.

Model text never injects HTML: every line is escaped *first*, and only then is a small subset
turned into markup: paragraphs (line breaks kept), **bold**, *em* / _em_, `code`, fenced code
blocks, bullet and numbered lists, `#` headings (shown small) and [links](https://...) whose
target is http or https. Anything else stays visible as text, e.g. `[x](javascript:alert(1))`.

`chat.js` implements the same algorithm for the live stream; when a response ends the page swaps
in this server rendering, so a finished answer always looks the same in every tab.
"""

from __future__ import annotations

import re
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+#.-]*)\s*$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBER = re.compile(r"^\s*\d{1,9}[.)]\s+(.*)$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE = re.compile(r"`([^`\n]+)`")
# Applied to escaped text: the URL cannot contain a quote or `<` any more (they became entities).
_LINK = re.compile(r"\[([^\[\]\n]+)\]\((https?://[^\s()<>]+)\)", re.IGNORECASE)
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_EM_STAR = re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])")
_EM_UNDER = re.compile(r"(?<![_\w])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![_\w])")
_TOKEN = re.compile("\x00(\\d+)\x00")
_SAFE_URL = re.compile(r"^https?://[^\s\"'<>`]+$", re.IGNORECASE)


def safe_url(url: Any) -> str | None:
    """The URL if it is an absolute http(s) URL, else None (never javascript:, data: ...)."""
    if isinstance(url, str) and _SAFE_URL.match(url.strip()):
        return url.strip()
    return None


def render_inline(text: str) -> str:
    """Escape, then bold / em / code / links. Returns HTML (a plain str)."""
    stash: list[str] = []

    def keep(html: str) -> str:
        stash.append(html)
        return f"\x00{len(stash) - 1}\x00"

    out: str = str(escape(text.replace("\x00", "")))
    out = _CODE.sub(lambda m: keep(f"<code>{m.group(1)}</code>"), out)
    out = _LINK.sub(
        lambda m: keep(
            f'<a href="{m.group(2)}" rel="noopener noreferrer nofollow" target="_blank">'
            f"{_emphasis(m.group(1))}</a>"
        ),
        out,
    )
    out = _emphasis(out)
    while _TOKEN.search(out):
        out = _TOKEN.sub(lambda m: stash[int(m.group(1))], out)
    return out


def _emphasis(html: str) -> str:
    html = _BOLD.sub(r"<strong>\1</strong>", html)
    html = _EM_STAR.sub(r"<em>\1</em>", html)
    return _EM_UNDER.sub(r"<em>\1</em>", html)


def render_html(text: str) -> str:
    lines = (text or "").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    list_tag = ""

    def flush_paragraph() -> None:
        if paragraph:
            out.append("<p>" + "<br>".join(render_inline(line) for line in paragraph) + "</p>")
            paragraph.clear()

    def flush_list() -> None:
        nonlocal list_tag
        if items:
            out.append(f"<{list_tag}>" + "".join(f"<li>{i}</li>" for i in items) + f"</{list_tag}>")
            items.clear()
        list_tag = ""

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush_paragraph()
            flush_list()
            marker, lang = fence.group(1), fence.group(2)
            code: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                code.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end of a still-streaming block)
            cls = f' class="language-{escape(lang)}"' if lang else ""
            out.append(f"<pre><code{cls}>{escape(chr(10).join(code))}</code></pre>")
            continue
        bullet, number = _BULLET.match(line), _NUMBER.match(line)
        if bullet or number:
            flush_paragraph()
            tag = "ul" if bullet else "ol"
            if list_tag and list_tag != tag:
                flush_list()
            list_tag = tag
            items.append(render_inline((bullet or number).group(1)))  # type: ignore[union-attr]
        elif not line.strip():
            flush_paragraph()
            flush_list()
        elif (heading := _HEADING.match(line)) is not None:
            flush_paragraph()
            flush_list()
            level = min(len(heading.group(1)) + 2, 6)
            out.append(f'<h{level} class="md-h">{render_inline(heading.group(2))}</h{level}>')
        elif items and line.startswith(("  ", "\t")):
            items[-1] += " " + render_inline(line.strip())  # a continuation line of a list item
        else:
            flush_list()
            paragraph.append(line)
        i += 1
    flush_paragraph()
    flush_list()
    return "".join(out)


def render(text: str) -> SafeString:
    """Model text as safe HTML."""
    return mark_safe(render_html(text))  # noqa: S308 - every piece of text was escaped above

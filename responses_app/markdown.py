"""Safe server-side Markdown for model output.

Model text never injects HTML: every line is escaped *first*, and only then is a small subset
turned into markup: paragraphs (line breaks kept), **bold**, *em* / _em_, `code`, fenced code
blocks (coloured by token for a few languages: highlight.py), bullet and numbered lists, task
lists (`- [x]`, disabled checkboxes), `#` headings (shown small), `>` blockquotes (one level:
paragraphs, lists, headings inside), GFM pipe tables, `$math$`, `$$math$$` and `$$` lines
fencing display math (code-styled, the TeX source kept) and [links](https://...) whose target is
http or https. Anything else stays visible as text, e.g. `[x](javascript:alert(1))`.
A fenced block gets a Copy button (shown only where the page's script runs).

A text still being written (`partial=True`) never shows half-built syntax: on its last, unfinished
line an inline code span, a link or an emphasis that has not closed yet loses its markers (a code
span and a link's address are held back until they close), and a fence line still being typed
is held; so is a table row still being written (only complete rows show), a `|` line that may
yet be a table's header (until the next line shows it is not) and a task box being typed.
Complete lines are otherwise final: nothing on them can close later.

`static/responses_app/chat/markdown.js` implements the same algorithm for the live stream
(tests/web/test_render_parity.py cuts every corpus document at every position); when a response ends
the page swaps in this server rendering, so a finished answer looks the same in every tab.
"""

from __future__ import annotations

import html
import re
from typing import Any, NamedTuple

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from .highlight import highlight

_FENCE_OPEN = re.compile(r"\s*(```|~~~)")
_LANG = re.compile(r"[\w+#.-]*")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBER = re.compile(r"^\s*\d{1,9}[.)]\s+(.*)$")
_HEADING_OPEN = re.compile(r"\s{0,3}(#{1,6})\s+")
_CODE = re.compile(r"`([^`\n]+)`")
# Applied to escaped text: the URL cannot contain a quote or `<` any more (they became entities).
_LINK = re.compile(r"\[([^\[\]\n]+)\]\((https?://[^\s()<>]+)\)", re.IGNORECASE)
_TOKEN = re.compile("\x00(\\d+)\x00")
_SAFE_URL = re.compile(r"^https?://[^\s\"'<>`]+$", re.IGNORECASE)
_WORD = re.compile(r"\w")
_LINE_BREAK = re.compile("\n")
# `$$display$$` and `$inline$` math: no space inside either end, no digit after (`$5 and $10`).
_MATH_DISPLAY = re.compile(r"\$\$([^$ \t\n](?:[^$\n]*[^$ \t\n])?)\$\$")
_MATH = re.compile(r"\$([^$ \t\n](?:[^$\n]*[^$ \t\n])?)\$(?![0-9])")
_MATH_OPEN = re.compile(r"\$(?=[^ \t\n0-9])")
_MATH_FENCE = re.compile(r"[ \t]*\$\$[ \t]*")  # a `$$` line alone opens (and closes) display math
_QUOTE = re.compile(r"[ \t]{0,3}>[ ]?")
_TASK = re.compile(r"\[([ xX])\][ \t]+")
_TASK_TYPED = re.compile(r"([ \t]*[-*+][ \t]+)\[[ xX]?\]?")
_PIPE_LED = re.compile(r"[ \t]*\|")
_DELIMITER_TYPED = re.compile(r"(?:[ \t]*\|[ \t|:-]*)?")
_DELIMITER_CELL = re.compile(r":?-+:?")
_EDGE_SPACE = re.compile(r"^[ \t]+|[ \t]+$")


class _Delimiter(NamedTuple):
    """An emphasis marker: where one may open, where one may close (each match starts there and is
    one character wide, so overlapping ones are found too), and its width. Each pattern starts with
    its literal character: the regex engine skips to it instead of trying every position in one
    long call that would hold the interpreter (and a server's event loop) meanwhile."""

    opens: re.Pattern[str]
    closes: re.Pattern[str]
    width: int


_BOLD = _Delimiter(re.compile(r"\*(?=\*\S)"), re.compile(r"\*(?<=\S\*)(?=\*)"), 2)
_EM_STAR = _Delimiter(re.compile(r"\*(?<![*\w]\*)(?=[^\s*])"), re.compile(r"\*(?<=[^\s*]\*)(?![*\w])"), 1)
_EM_UNDER = _Delimiter(re.compile(r"_(?<![_\w]_)(?=[^\s_])"), re.compile(r"_(?<=[^\s_]_)(?![_\w])"), 1)
# What a partial last line may be in the middle of: a fence being typed, a link, an emphasis.
_FENCE_TYPED = re.compile(r"(?:(?:```|~~~)\s*[\w+#.-]*|`{1,2}|~{1,2})")
_OPEN_LINK = re.compile(r"\[([^\[\]\n]*)(?:\](?:\([^()\s]*)?)?$")
_BOLD_OPEN = re.compile(r"\*\*(?=\S)")
_EM_STAR_OPEN = _EM_STAR.opens
_EM_UNDER_OPEN = _EM_UNDER.opens
_COPY_BUTTON = '<button type="button" class="copy" data-copy="code" aria-label="Copy code"></button>'


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
    out = _MATH_DISPLAY.sub(lambda m: keep(f'<code class="md-math md-math-display">{m.group(1)}</code>'), out)
    out = _MATH.sub(lambda m: keep(f'<code class="md-math">{m.group(1)}</code>'), out)
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


def _spans(text: str, mark: _Delimiter) -> list[tuple[int, int]]:
    """Where `mark` pairs up, as `open(.+?)close` substituted left to right pairs it (a closer is the
    first one after the opener, on the same line), found in one pass: (opener, closer) offsets."""
    closers = [m.start() for m in mark.closes.finditer(text)]
    if not closers:
        return []
    breaks = [m.start() for m in _LINE_BREAK.finditer(text)]
    found: list[tuple[int, int]] = []
    c = b = end = 0
    for m in mark.opens.finditer(text):
        start = m.start()
        if start < end:
            continue
        while c < len(closers) and closers[c] <= start + mark.width:  # at least one character inside
            c += 1
        if c == len(closers):
            break
        while b < len(breaks) and breaks[b] < start:
            b += 1
        if b < len(breaks) and breaks[b] < closers[c]:
            continue  # the first closer is on a later line: this opener stays text
        found.append((start, closers[c]))
        end = closers[c] + mark.width
    return found


def _wrap(text: str, mark: _Delimiter, tag: str) -> str:
    pieces: list[str] = []
    at = 0
    for start, close in _spans(text, mark):
        pieces += (text[at:start], f"<{tag}>", text[start + mark.width:close], f"</{tag}>")
        at = close + mark.width
    return "".join(pieces) + text[at:] if pieces else text


def _emphasis(html: str) -> str:
    return _wrap(_wrap(_wrap(html, _BOLD, "strong"), _EM_STAR, "em"), _EM_UNDER, "em")


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    pieces: list[str] = []
    at = 0
    for start, end in spans:
        pieces += (text[at:start], "\x01" * (end - start))
        at = end
    return "".join(pieces) + text[at:] if pieces else text


def _matches(text: str, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


def _closed(text: str, mark: _Delimiter) -> list[tuple[int, int]]:
    return [(start, close + mark.width) for start, close in _spans(text, mark)]


def _trailing_marks(masked: str) -> int:
    """Where a run of markers that may yet open something ends the line (its length if none)."""
    if masked.endswith("*"):
        return len(masked.rstrip("*"))
    if masked.endswith("_"):
        start = len(masked.rstrip("_"))
        if start == 0 or not _WORD.match(masked[start - 1]):
            return start
    return len(masked)


def tidy_partial(line: str) -> str:
    """The last line of a text still being written, without the markers of what has not closed."""
    masked = _mask(line, _matches(line, _CODE))
    tick = masked.find("`")
    if tick >= 0:  # a code span still open: held back whole
        line, masked = line[:tick], masked[:tick]
    masked = _mask(masked, _matches(masked, _MATH_DISPLAY))
    masked = _mask(masked, _matches(masked, _MATH))
    masked = _mask(masked, _matches(masked, _LINK))
    link = _OPEN_LINK.search(masked)
    if link is not None:  # a link still open: its label as text, its address held back
        line = line[:link.start()] + line[link.start(1):link.end(1)]
        masked = masked[:link.start()] + masked[link.start(1):link.end(1)]
    drop = bytearray(len(masked))  # 1 where a marker is dropped
    for m in _MATH_OPEN.finditer(masked):  # math still open: its opening `$` goes
        drop[m.start()] = 1
    if masked.endswith("$"):
        drop[len(masked.rstrip("$")):] = b"\x01" * (len(masked) - len(masked.rstrip("$")))
    for closed, opener, width in ((_BOLD, _BOLD_OPEN, 2), (_EM_STAR, _EM_STAR_OPEN, 1),
                                  (_EM_UNDER, _EM_UNDER_OPEN, 1)):
        masked = _mask(masked, _closed(masked, closed))
        hits = [m.start() for m in opener.finditer(masked)]
        for start in hits:
            drop[start:start + width] = b"\x01" * width
        if hits:
            masked = "".join(["\x01" if dropped else c for c, dropped in zip(masked, drop, strict=True)])
    trailing = _trailing_marks(masked)
    drop[trailing:] = b"\x01" * (len(drop) - trailing)
    return "".join([c for c, dropped in zip(line, drop, strict=True) if not dropped])


def _fence(line: str) -> tuple[str, str] | None:
    """A fence line's marker and language: the marker, then at most a language word, both padded;
    or a `$$` line alone, which fences display math."""
    opened = _FENCE_OPEN.match(line)
    if opened is None:
        return ("$$", "") if _MATH_FENCE.fullmatch(line) else None
    lang = line[opened.end():].strip()
    return (opened.group(1), lang) if _LANG.fullmatch(lang) else None


def _heading(line: str) -> tuple[int, str] | None:
    """A heading's level and text, without a closing run of `#` (`# Title ##`)."""
    opened = _HEADING_OPEN.match(line)
    if opened is None:
        return None
    return len(opened.group(1)), line[opened.end():].rstrip().rstrip("#").rstrip()


def _cells(line: str) -> list[str]:
    """A table row's cells: split at each `|` not escaped (`\\|` is a pipe inside a cell), the
    row's outer pipes dropped, each cell without its padding."""
    row = _EDGE_SPACE.sub("", line)
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    cells: list[str] = []
    cell: list[str] = []
    at = 0
    while at < len(row):
        if row[at] == "\\" and row[at + 1:at + 2] == "|":
            cell.append("|")
            at += 2
            continue
        if row[at] == "|":
            cells.append("".join(cell))
            cell = []
        else:
            cell.append(row[at])
        at += 1
    cells.append("".join(cell))
    return [_EDGE_SPACE.sub("", c) for c in cells]


def _alignments(line: str) -> list[str] | None:
    """A delimiter row's alignments ("", "left", "center", "right"), or None if it is not one."""
    if "-" not in line:
        return None
    cells = _cells(line)
    if not all(_DELIMITER_CELL.fullmatch(c) for c in cells):
        return None
    return [("center" if c.endswith(":") else "left") if c.startswith(":") else ("right" if c.endswith(":") else "")
            for c in cells]


def _row(cells: list[str], aligns: list[str], tag: str) -> str:
    shown = (cells + [""] * len(aligns))[:len(aligns)]
    return "<tr>" + "".join((f'<{tag} class="md-{a}">' if a else f"<{tag}>") + f"{render_inline(c)}</{tag}>"
                            for c, a in zip(shown, aligns, strict=True)) + "</tr>"


def _table(header: str, aligns: list[str], rows: list[str]) -> str:
    """A table in its own scrolling wrapper (a wide one scrolls there, not the page)."""
    body = "<tbody>" + "".join(_row(_cells(r), aligns, "td") for r in rows) + "</tbody>" if rows else ""
    return ('<div class="md-table" role="region" aria-label="Table" tabindex="0"><table><thead>'
            f'{_row(_cells(header), aligns, "th")}</thead>{body}</table></div>')


def _item(text: str) -> tuple[str, str]:
    """A bullet item's class and HTML: a task (`[ ]`, `[x]`) shows a disabled checkbox labelled by
    its text."""
    task = _TASK.match(text)
    if task is None:
        return "", render_inline(text)
    checked = " checked" if task.group(1) != " " else ""
    return "md-task", f'<label><input type="checkbox" disabled{checked}> {render_inline(text[task.end():])}'


def render_html(text: str, partial: bool = False, quotes: bool = True) -> str:
    """Model text as HTML (a plain str); `partial`: the text is still being written; `quotes`:
    `>` lines make a blockquote (not inside one: quotes do not nest)."""
    lines = (text or "").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    last = len(lines) - 1
    out: list[str] = []
    paragraph: list[str] = []
    items: list[list[str]] = []
    list_tag = ""

    def flush_paragraph() -> None:
        if paragraph:
            out.append("<p>" + "<br>".join(render_inline(line) for line in paragraph) + "</p>")
            paragraph.clear()

    def flush_list() -> None:
        nonlocal list_tag
        if items:
            out.append(f"<{list_tag}>" + "".join(
                f'<li class="{c}">{h}</label></li>' if c else f"<li>{h}</li>" for c, h in items) + f"</{list_tag}>")
            items.clear()
        list_tag = ""

    i = 0
    while i < len(lines):
        line = lines[i]
        if quotes and _QUOTE.match(line):
            flush_paragraph()
            flush_list()
            start = i
            while i < len(lines) and _QUOTE.match(lines[i]):
                i += 1
            inner = "\n".join(lines[k][_QUOTE.match(lines[k]).end():] for k in range(start, i))  # type: ignore[union-attr]
            out.append(f"<blockquote>{render_html(inner, partial and i > last, quotes=False)}</blockquote>")
            continue
        if partial and i == last - 1 and _PIPE_LED.match(line) and _DELIMITER_TYPED.fullmatch(lines[last]):
            break  # may be a table's header: held until its delimiter row (or something else) follows
        if partial and i == last:
            typed = _TASK_TYPED.fullmatch(line)
            if _PIPE_LED.match(line):
                line = ""  # a table row (or header) still being written
            elif typed:
                line = typed.group(1)  # a task box being typed
            else:
                line = "" if _FENCE_TYPED.fullmatch(line.strip()) else tidy_partial(line)
        fence = _fence(line)
        if fence:
            flush_paragraph()
            flush_list()
            marker, lang = fence
            code: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                if not (partial and i == last and lines[i].strip() and marker.startswith(lines[i].strip())):
                    code.append(lines[i])  # (a closing fence being typed is held)
                i += 1
            i += 1  # the closing fence (or the end of a still-streaming block)
            if marker == "$$":
                out.append(f'<p><code class="md-math md-math-display">{escape(chr(10).join(code))}</code></p>')
                continue
            cls = f' class="language-{escape(lang)}"' if lang else ""
            out.append(f'<div class="code-block"><pre><code{cls}>{highlight(chr(10).join(code), lang)}</code></pre>'
                       f"{_COPY_BUTTON}</div>")
            continue
        aligns = _alignments(lines[i + 1]) if "|" in line and i + 1 < len(lines) and not (
            partial and i + 1 == last) else None
        if aligns is not None and len(aligns) == len(_cells(line)):
            flush_paragraph()
            flush_list()
            rows: list[str] = []
            i += 2
            while i < len(lines) and "|" in lines[i] and not (partial and i == last):
                rows.append(lines[i])
                i += 1
            if partial and i == last and "|" in lines[i]:
                i += 1  # the row still being written: only complete rows show
            out.append(_table(line, aligns, rows))
            continue
        bullet, number = _BULLET.match(line), _NUMBER.match(line)
        if bullet or number:
            flush_paragraph()
            tag = "ul" if bullet else "ol"
            if list_tag and list_tag != tag:
                flush_list()
            list_tag = tag
            items.append(list(_item(bullet.group(1))) if bullet else ["", render_inline(number.group(1))])  # type: ignore[union-attr]
        elif not line.strip():
            flush_paragraph()
            flush_list()
        elif (heading := _heading(line)) is not None:
            flush_paragraph()
            flush_list()
            level = min(heading[0] + 2, 6)
            out.append(f'<h{level} class="md-h">{render_inline(heading[1])}</h{level}>')
        elif items and line.startswith(("  ", "\t")):
            items[-1][1] += " " + render_inline(line.strip())  # a continuation line of a list item
        else:
            flush_list()
            paragraph.append(line)
        i += 1
    flush_paragraph()
    flush_list()
    return "".join(out)


_LINE_MARKS = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+]\s+|\d{1,9}[.)]\s+)")


def plain_text(line: str) -> str:
    """One line of Markdown as the words it shows, without its markers (a title from a prompt)."""
    shown = re.sub(r"<[^>]+>", "", render_inline(_LINE_MARKS.sub("", line)))
    return html.unescape(shown)


def render(text: str, partial: bool = False) -> SafeString:
    """Model text as safe HTML."""
    return mark_safe(render_html(text, partial))  # noqa: S308 - every piece of text was escaped above

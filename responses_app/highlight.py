"""Syntax colours for fenced code with a language, as token classes: `hl-k` keyword, `hl-s` string,
`hl-c` comment, `hl-n` number (chat.css colours them through custom properties).

A small highlighter of its own, since no maintained library gives identical HTML in Python and
JavaScript (Pygments and highlight.js/Prism tokenise and name classes differently), and the live
stream must render exactly what the server does. `static/responses_app/chat/highlight.js` is its
twin, held to it by tests/web/test_render_parity.py. Every piece is escaped; a language it does
not know stays plain. One pass over the code, so a block costs time in proportion to its length;
an unclosed string runs to the end of its line, so a line still being written keeps its colours.
A block longer than MAX_CHARS stays plain (as large files do on code hosts): what one hostile
answer can cost the render is bounded, and a reader gains little from colours there.
"""

from __future__ import annotations

import re
from html import escape  # what django.utils.html.escape does, without a SafeString per token

MAX_CHARS = 20_000  # highlight.js has the same bound
_IDENT = r"[A-Za-z_$][A-Za-z0-9_$]*"
_NUMBER = r"(?<![A-Za-z0-9_$.])[0-9]+(?:\.[0-9]+)?"
_STRINGS = r"\"(?:[^\"\\\n]|\\[^\n])*\"?|'(?:[^'\\\n]|\\[^\n])*'?"


def _lang(comment: str, keywords: str) -> tuple[re.Pattern[str], frozenset[str]]:
    pattern = re.compile(f"(?P<c>{comment})|(?P<s>{_STRINGS})|(?P<n>{_NUMBER})|(?P<w>{_IDENT})")
    return pattern, frozenset(keywords.split())


_PYTHON = _lang(r"#[^\n]*", "False None True and as assert async await break class continue def del elif "
                "else except finally for from global if import in is lambda nonlocal not or pass raise return "
                "try while with yield match case self print len range")
_JS = _lang(r"//[^\n]*", "async await break case catch class const continue default delete do else export "
            "extends false finally for function if import in instanceof let new null of return static super "
            "switch this throw true try typeof undefined var void while yield")
_SHELL = _lang(r"(?<![^ \t\n])#[^\n]*", "if then else elif fi for while do done case esac in function "
               "return export local echo cd exit set")
LANGUAGES = {"python": _PYTHON, "py": _PYTHON, "javascript": _JS, "js": _JS, "typescript": _JS, "ts": _JS,
             "bash": _SHELL, "sh": _SHELL, "shell": _SHELL, "zsh": _SHELL}


def highlight(code: str, lang: str) -> str:
    """The code as escaped HTML, its tokens wrapped in `<span class="hl-…">` if `lang` is known."""
    known = LANGUAGES.get(lang.lower())
    if known is None or len(code) > MAX_CHARS:
        return escape(code)
    pattern, keywords = known
    pieces: list[str] = []
    at = 0
    for m in pattern.finditer(code):
        kind = m.lastgroup or ""
        if kind == "w" and m.group() not in keywords:
            continue
        pieces += (escape(code[at:m.start()]), f'<span class="hl-{"k" if kind == "w" else kind}">',
                   escape(m.group()), "</span>")
        at = m.end()
    return "".join(pieces) + escape(code[at:])

"""The Markdown export cannot be forged by what it carries: a citation title is text (never a
`javascript:` link), raw HTML is escaped outside code, a link of the model's stays a link only to
an http(s) address, and neither the user's prompt nor the model's answer can make a heading of
the export's own (`## You ·`)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from responses_app.models import Conversation, ResponseRequest
from tests.web.test_pages import client_for, make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]

FORGED = "x](javascript:alert(document.domain)) [y"


def exported(owner: Any, turn: ResponseRequest) -> str:
    response = client_for(owner).get(reverse("responses_app:conversation-export", args=[turn.conversation_id, "md"]))
    assert response.status_code == 200
    return response.content.decode()


def top_level(text: str) -> list[str]:
    """The export's own lines: everything that is not inside a quote or a fence of its own."""
    lines, fence = [], ""
    for line in text.splitlines():
        if fence:
            fence = "" if line == fence else fence
            continue
        if re.fullmatch(r"`{3,}", line):
            fence = line
            continue
        if not line.startswith(">"):
            lines.append(line)
    return lines


def text_turn(owner: Any, text: str, annotations: list[dict[str, Any]] | None = None, prompt: str = "Hi"
              ) -> ResponseRequest:
    return make_turn(owner, prompt=prompt, blocks=[{"id": "o0-c0", "kind": "text", "state": "done", "text": text,
                                                    "annotations": annotations or []}])


def test_a_citation_title_is_text_and_its_url_a_plain_destination(owner: Any) -> None:
    turn = text_turn(owner, "See the sources.", [
        {"type": "url_citation", "url": "https://example.com/a", "title": FORGED},
        {"type": "url_citation", "url": "https://example.com/b(c)[d]", "title": "<img src=x onerror=alert(1)>"},
        {"type": "url_citation", "url": "javascript:alert(1)", "title": "dropped"},
    ])
    text = exported(owner, turn)
    assert not re.search(r"(?<!\\)\]\(javascript", text) and "dropped" not in text
    assert r"1. [x\](javascript:alert(document.domain)) \[y](https://example.com/a)" in text
    assert r"2. [\<img src=x onerror=alert(1)\>](https://example.com/b%28c%29%5Bd%5D)" in text
    assert "<img" not in text.replace(r"\<img", "")


def test_the_model_cannot_forge_the_exports_headings(owner: Any) -> None:
    answer = "Done.\n\n## You · 2020-01-01 00:00\n\nsend me your password\n\nSetext\n---\n\n# Title\r## You · again"
    turn = text_turn(owner, answer, prompt="Hi\n## Assistant · gpt · completed\n\nFake answer")
    text = exported(owner, turn)
    headings = [line for line in top_level(text) if line.startswith("#")]
    assert len(headings) == 3, headings  # the title, You, Assistant: the export's own only
    assert headings[1].startswith("## You · ") and headings[2] == "## Assistant · sim-text · completed"
    assert "> ## You · 2020-01-01 00:00" in text and "> ## Assistant · gpt · completed" in text
    assert "> ## You · again" in text, "a bare CR is a line ending in Markdown: quoted too"


def test_raw_html_in_the_answer_is_escaped_outside_code(owner: Any) -> None:
    answer = ("</blockquote><h2>You · forged</h2> and <script>alert(1)</script> and a < b\n\n"
              "```html\n<div>kept in code</div>\n```\n\nInline `<b>` code and <!-- a comment -->")
    text = exported(owner, text_turn(owner, answer))
    assert "&lt;/blockquote>&lt;h2>You · forged&lt;/h2>" in text and "&lt;script>" in text
    assert "a < b" in text, "a less-than that starts no tag stays as written"
    assert "> <div>kept in code</div>" in text and "`<b>`" in text and "&lt;!-- a comment" in text
    assert not re.search(r"<(?!div>|/div>|b>)[A-Za-z/!]", text), "no raw HTML outside code"


def test_the_models_links_stay_links_only_to_http_addresses(owner: Any) -> None:
    answer = ("[ok](https://example.com/x) [bad](javascript:alert(1)) [entity](&#106;avascript:alert(1)) "
              "![img](data:image/png;base64,xx) [rel](/admin/) <javascript:alert(1)>\n\n"
              "[ref]: javascript:alert(1)\n[good]: https://example.com/g\n\n`[code](javascript:x)`")
    text = exported(owner, text_turn(owner, answer))
    assert "[ok](https://example.com/x)" in text
    for broken in (r"[bad]\(javascript", r"[entity]\(&#106;", r"![img]\(data:", r"[rel]\(/admin/)",
                   "&lt;javascript:", r"> \[ref]: javascript", "> [good]: https://example.com/g",
                   "`[code](javascript:x)`"):
        assert broken in text, broken
    assert not re.search(r"\]\((?!https?://)", text.replace("`[code](javascript:x)`", "")), "only http(s) links"


def test_the_title_model_and_error_are_text(owner: Any) -> None:
    turn = text_turn(owner, "Hi")
    Conversation.objects.filter(pk=str(turn.conversation_id)).update(title="T\n## You · x <b>")
    ResponseRequest.objects.filter(pk=turn.pk).update(model="m*x*", error_code="bad_thing",
                                                      error_message="oops\n## You · [x](javascript:y)")
    text = exported(owner, turn)
    assert text.startswith(r"# T ## You · x \<b\>" + "\n")
    assert r"## Assistant · m\*x\* · completed" in text
    assert r"> **bad_thing:** oops ## You · \[x\](javascript:y)" in text

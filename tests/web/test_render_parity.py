"""What the browser still renders itself, held to the server: the Markdown of a growing text
(markdown.py and markdown.js give the same HTML whole, streamed in chunks of any size, and cut at
every position while still being written, where neither shows half-built syntax), and the badge
of a live turn (turns.badge_key and state.js). Every block's markup is the server's alone
(responses_app/blocks/, tests/web/test_live_blocks.py).

Node runs the browser modules (tests/js/render_parity.mjs). Skipped without node, unless CI=true.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from responses_app import markdown
from responses_app.highlight import MAX_CHARS
from responses_app.simulator.texts import PARAGRAPHS, RICH_ANSWER, SUMMARY_PARTS
from responses_app.web.turns import badge_key, badge_text, vocabulary
from tests.node import node_or_skip

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "js" / "render_parity.mjs"

HOSTILE = [
    "<script>alert('x')</script> and <img src=x onerror=alert(1)>",
    "[click](javascript:alert(1)) [ok](https://example.org/a?b=1&c=2) [q](https://x.org/\"onmouseover=alert(1))",
    "**unbalanced bold and *em and `code and _under",
    "Entities: &amp; &lt;b&gt; &#x27; &quot; &copy; &#0; & < > \" '",
    "# Heading **bold** #\n\n## Two\n\n###### Six\n####### seven",
    "Para one\nline two\n\n- a\n- b *em*\n  continued\n+ c\n\n1. one\n2) two\n\n* star after number",
    "```python\nx = '<p>' & 1\n\n\ny = 2\n```\nafter the fence\n\n~~~\nunclosed ~~~ fence <b>\n\nstill code",
    "snake_case_word and 2*3*4 and **b** _e_ *e* __x__ ***both***",
    "Windows\r\nline ends\r\n\r\nand a lone\rcarriage return",
    "Nul \x00 bytes \x00 and `code with <tags>` and [**bold link**](https://example.com/x_y_z)",
    "Emoji 🦀 and CJK 漢字, RTL שלום, combining é\n\n\n\n\nmany blank lines",
    "- list\n\n\n- list again\n```\ncode right after\n```",
    "[a [nested](https://x.org) link](https://y.org) and [] and [x]( and ](https://z.org) `` ` `` ~~ ~",
    "",
    "   \n\t\n",
    "| <b>a</b> | [x](javascript:alert(1)) |\n|---|:-:|\n| `x|y` | a \\| b | extra |\n|short\nno pipe\n|a|\n|-|-|",
    "a | b\n--|--\n| x\n\n|||\n|-|-|\n| not | a | table |\n| --- | --- |\n\n|x|\n|:-:|\n|\\|",
    "> quote <i>\n>no space\n   > three spaces\n    > four\n> > nested\n> - item\n> ```\n> code\n\n>",
    "- [ ] open\n- [x] done\n- [X] upper\n- [] not\n- [y] not\n* [ ]\n1. [ ] ordered\n- [x]tight\n  continued",
    "```Python\nif x: # c <b>\n  s = 'a\\'b' + \"c\\\\\" + 'open\nn = 1.5e3 + x1 + .5 + é1\n```\n~~~js\n"
    "const a = `t` // c\n/* no */ return null;\n~~~\n```sh\necho $HOME # c\na#b ${x}\n```\n```rust\nfn main() {}\n```",
    "$$\n\\frac{a}{b} <b>\n\n$$ x\n $$ \nafter\n$$\n$$abc\n$$",
    "$x$ $$y$$ $ a$ $a $ $5 and $10 $$ $a$5 `$b$` [$c$](https://x.org) **$d$** $a_1*b_2$ $<b>$ $$$",
]

# Too long to cut at every position: rendered whole only. A code block at the highlighter's bound,
# counted in code points (astral characters are two UTF-16 units in JavaScript), and just past it.
_JS_LINE = "x = 1 // c\n"
LONG = [f"```python\n{'😀' * (MAX_CHARS - 4)}def\n```", f"```python\n{'😀' * MAX_CHARS}def\n```",
        f"```js\n{_JS_LINE * (MAX_CHARS // len(_JS_LINE) + 1)}```"]

# Documents whose every construct closes: cut anywhere, none may show a marker.
WELL_FORMED = [
    "\n\n".join(PARAGRAPHS[:6]),
    "\n\n".join(SUMMARY_PARTS),
    "Server-sent events ([html.spec.whatwg.org](https://html.spec.whatwg.org/multipage/server-sent-events.html)) "
    "keep **one** connection open; see *the spec* and `EventSource`.\n\n"
    "- a **bold** point\n- a [link](https://example.org/a_b) and _emphasis_\n  continued\n\n"
    "1. first\n2. [**bold link**](https://example.com/x)\n\n"
    "```python\nprint('**not bold** [x](y)')\n\n\nprint(`tick`)\n```\n\n"
    "## A heading with `code` and *em*\n\n"
    "After the fence, `code`, **bold *nested* text** and a last [link](https://example.org/end).",
    RICH_ANSWER,
    "Display math on lines of its own:\n\n$$\n\\sum{k} k^2 = \\frac{n(n+1)(2n+1)}{6}\n$$\n\nand after it, **bold**.",
]

HEADER_PENDING = re.compile(r"(?:^|\n)[ \t]*\|[^\n]*\n$")

BADGES: list[tuple[str, dict[str, Any] | None]] = [
    ("pending", None),
    ("completed", None), ("failed", None), ("error", None), ("incomplete", None), ("cancelled", None),
    ("unknown", None),
    ("streaming", {"meta": {"status": "queued"}, "blocks": []}),
    ("streaming", {"meta": {"status": "in_progress", "retry": {"status": 429, "attempt": 2, "of": 3}},
                   "blocks": []}),
    ("streaming", {"meta": {"status": "completed", "retry": {"status": 500, "attempt": 1, "of": 3}}, "blocks": []}),
    ("streaming", {"meta": {"status": "in_progress"}, "blocks": []}),
    ("streaming", {"meta": {}, "blocks": [{"kind": "reasoning", "text": "hm"}]}),
    ("streaming", {"meta": {}, "blocks": [{"kind": "tool", "tool": "web_search_call", "state": "searching"}]}),
    ("streaming", {"meta": {}, "blocks": [{"kind": "tool", "tool": "function_call", "state": "completed"}]}),
    ("streaming", {"meta": {"activity": "tool"},
                   "blocks": [{"kind": "tool", "tool": "code_interpreter_call", "state": "interpreting"}]}),
    ("streaming", {"meta": {"status": "waiting_for_approval"}, "blocks": []}),
    ("streaming", {"meta": {}, "blocks": [{"kind": "text", "text": "Hi"}]}),
    ("streaming", {"meta": {}, "blocks": [{"kind": "text", "text": "Hi"}, {"kind": "reasoning", "text": ""}]}),
]


def run_node(corpus: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    node = node_or_skip("render parity")
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(corpus))
    done = subprocess.run([node, str(SCRIPT), str(path)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    corpus = {"vocabulary": vocabulary(), "texts": HOSTILE + WELL_FORMED, "badges": BADGES, "wholes": LONG}
    return {"corpus": corpus, "node": run_node(corpus, tmp_path_factory.mktemp("parity"))}


def test_long_texts_render_the_same_whole(rendered: dict[str, Any]) -> None:
    assert len(rendered["node"]["wholes"]) == len(LONG)
    for text, browser in zip(LONG, rendered["node"]["wholes"], strict=True):
        assert browser == markdown.render_html(text), text[:80]


def test_markdown_renders_the_same_whole_and_streamed(rendered: dict[str, Any]) -> None:
    for text, browser in zip(rendered["corpus"]["texts"], rendered["node"]["texts"], strict=True):
        server = markdown.render_html(text)
        assert browser["whole"] == server, text
        for streamed in browser["streamed"]:
            assert streamed == server, text


def test_a_text_cut_at_every_position_renders_the_same_in_both(rendered: dict[str, Any]) -> None:
    for text, browser in zip(rendered["corpus"]["texts"], rendered["node"]["texts"], strict=True):
        whole, live = browser["cuts"]["whole"], browser["cuts"]["live"]
        assert len(whole) == len(live) == len(text) + 1
        for end in range(len(text) + 1):
            server = markdown.render_html(text[:end], partial=True)
            assert whole[end] == server, (text[:end], whole[end], server)
            assert live[end] == server, ("streamed one character at a time", text[:end])
            if (end == 0 or text[end - 1] == "\n") and not HEADER_PENDING.search(text[:end]):
                # complete lines are final: nothing held (but a `|` line may yet head a table)
                assert server == markdown.render_html(text[:end]), text[:end]


def visible(rendering: str) -> str:
    """The text a reader sees outside code, where a marker would be half-built syntax."""
    rendering = re.sub(r"<pre>.*?</pre>|<code[^>]*>.*?</code>", " ", rendering, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", rendering))


@pytest.mark.parametrize("text", WELL_FORMED, ids=["paragraphs", "summaries", "constructs", "rich", "display math"])
def test_no_cut_of_a_text_still_being_written_shows_half_built_syntax(text: str) -> None:
    assert not re.search(r"[*`\[\]_]|\]\(", visible(markdown.render_html(text))), "the corpus closes everything"
    for end in range(len(text) + 1):
        seen = visible(markdown.render_html(text[:end], partial=True))
        assert not re.search(r"[*`\[\]_]|https?:", seen), (text[:end], seen)


def test_markers_that_never_close_stay_visible_once_written(rendered: dict[str, Any]) -> None:
    final = markdown.render_html(HOSTILE[2])
    assert final == "<p>**unbalanced bold and *em and `code and _under</p>"
    assert markdown.render_html(HOSTILE[2] + "\n", partial=True) == final  # the line is complete
    assert markdown.render_html("see [the spec](https://html.spec.whatwg.org/mul", partial=True) == \
        "<p>see the spec</p>"
    assert markdown.render_html("```py\nx = 1\n``", partial=True) == markdown.render_html("```py\nx = 1")


def test_a_live_turn_reads_the_same_badge_in_the_browser(rendered: dict[str, Any]) -> None:
    for (status, view), (key, words) in zip(BADGES, rendered["node"]["badges"], strict=True):
        assert key == badge_key(status, view), (status, view)
        assert words == badge_text(key, view)
    assert rendered["node"]["badges"][8] == ["retrying", "Retrying (429, 2 of 3)…"]
    assert [key for key, _ in rendered["node"]["badges"][1:7]] == [
        "completed", "failed", "error", "incomplete", "cancelled", "unknown"], "one badge per outcome"
    assert len({words for _, words in rendered["node"]["badges"][1:7]}) == 6, "each worded apart"


def test_the_add_op_places_a_block_where_the_python_reducer_does(tmp_path: Path) -> None:
    from responses_app.streaming.view import apply_op

    blocks = [{"id": "a", "kind": "text", "text": "A"}, {"id": "b", "kind": "tool", "tool": "function_call"}]
    notice = {"id": "safety-notice", "kind": "compaction", "tool": "content_filter", "state": "retracted"}
    adds = [(blocks, {**notice, "after": "a"}), (blocks, {**notice, "after": "b"}), (blocks, {**notice, "after": "zz"}),
            (blocks, notice), (blocks, {"id": "a", "text": "A2", "after": "b"})]
    browser = run_node({"vocabulary": vocabulary(), "texts": [], "adds": adds}, tmp_path)["adds"]
    for (start, added), placed in zip(adds, browser, strict=True):
        view = {"revision": 0, "meta": {}, "blocks": [dict(b) for b in start]}
        apply_op(view, ["add", added])
        assert placed == view["blocks"], added
    assert [b["id"] for b in browser[0]] == ["a", "safety-notice", "b"]
    assert all("after" not in b for placed in browser for b in placed)

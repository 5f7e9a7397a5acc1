"""Rich answers in the server's Markdown (markdown.py): pipe tables, blockquotes, task lists and
math, escaped first like everything else, and, while an answer streams, a table that only ever
shows complete rows. The browser renders the same HTML (tests/web/test_render_parity.py holds the
two renderers to each other over these constructs, cut at every position)."""

from __future__ import annotations

import html
import re

from responses_app import markdown
from responses_app.simulator.texts import RICH_ANSWER

WRAP = '<div class="md-table" role="region" aria-label="Table" tabindex="0">'


def test_a_pipe_table_renders_with_its_alignments_and_inline_markup() -> None:
    text = "| Name | Qty | Note |\n|:--|:-:|--:|\n| **a** | 1 | `x` |\n| b \\| c |\n\nafter"
    assert markdown.render_html(text) == (
        f"{WRAP}<table><thead><tr><th class=\"md-left\">Name</th><th class=\"md-center\">Qty</th>"
        '<th class="md-right">Note</th></tr></thead><tbody>'
        '<tr><td class="md-left"><strong>a</strong></td><td class="md-center">1</td>'
        '<td class="md-right"><code>x</code></td></tr>'
        '<tr><td class="md-left">b | c</td><td class="md-center"></td><td class="md-right"></td></tr>'
        "</tbody></table></div><p>after</p>")


def test_a_delimiter_row_that_does_not_match_the_header_makes_no_table() -> None:
    assert markdown.render_html("| a | b |\n|---|") == "<p>| a | b |<br>|---|</p>"
    assert markdown.render_html("a | b\nno delimiter") == "<p>a | b<br>no delimiter</p>"
    assert markdown.render_html("| a |\n|---|\nrow without a pipe") == (
        f"{WRAP}<table><thead><tr><th>a</th></tr></thead></table></div><p>row without a pipe</p>")


def test_table_cells_are_escaped_and_links_stay_http() -> None:
    rendered = markdown.render_html("| <img src=x onerror=alert(1)> | [x](javascript:alert(1)) |\n|-|-|")
    assert "<img" not in rendered and "&lt;img" in rendered
    assert "href" not in rendered and "[x](javascript:alert(1))" in rendered


def test_a_blockquote_holds_paragraphs_and_lists_one_level_deep() -> None:
    assert markdown.render_html("> quoted *em*\n>\n> - item\n> > not nested\n\nafter") == (
        "<blockquote><p>quoted <em>em</em></p><ul><li>item</li></ul><p>&gt; not nested</p></blockquote>"
        "<p>after</p>")
    assert markdown.render_html("> <script>x</script>") == (
        "<blockquote><p>&lt;script&gt;x&lt;/script&gt;</p></blockquote>")


def test_a_task_list_shows_disabled_checkboxes_labelled_by_their_text() -> None:
    assert markdown.render_html("- [ ] open\n- [x] **done**\n- [] plain\n1. [ ] ordered") == (
        '<ul><li class="md-task"><label><input type="checkbox" disabled> open</label></li>'
        '<li class="md-task"><label><input type="checkbox" disabled checked> <strong>done</strong></label></li>'
        "<li>[] plain</li></ul><ol><li>[ ] ordered</li></ol>")


def test_math_is_code_styled_with_its_tex_kept_and_prices_stay_text() -> None:
    assert markdown.render_html("$a<b$ and $$x^2$$ cost $5 and $10, `$c$`") == (
        '<p><code class="md-math">a&lt;b</code> and <code class="md-math md-math-display">x^2</code> '
        "cost $5 and $10, <code>$c$</code></p>")
    assert markdown.render_html("so $x + ", partial=True) == "<p>so x + </p>"  # the opener is held
    assert markdown.render_html("pay $5 now", partial=True) == "<p>pay $5 now</p>"


def test_lines_of_double_dollars_fence_display_math() -> None:
    text = "$$\n\\frac{a}{b} < 1\n\nx\n$$\nafter"
    assert markdown.render_html(text) == (
        '<p><code class="md-math md-math-display">\\frac{a}{b} &lt; 1\n\nx</code></p><p>after</p>')
    assert markdown.render_html("$$\nx\n$", partial=True) == markdown.render_html("$$\nx")  # closing held
    assert markdown.render_html("$$x") == "<p>$$x</p>"


def test_a_task_box_being_typed_shows_an_empty_item_not_its_brackets() -> None:
    for typed in ("- [", "- [ ", "- [x", "- [x]", "- [ ]"):
        assert markdown.render_html(typed, partial=True) == "<ul><li></li></ul>", typed


def test_code_with_a_known_language_is_coloured_by_token_and_escaped() -> None:
    assert markdown.render_html("```python\nif x == '<b>': # 1 <i>\n    return 2.5\n```") == (
        '<div class="code-block"><pre><code class="language-python"><span class="hl-k">if</span> x == '
        '<span class="hl-s">&#x27;&lt;b&gt;&#x27;</span>: <span class="hl-c"># 1 &lt;i&gt;</span>\n    '
        '<span class="hl-k">return</span> <span class="hl-n">2.5</span></code></pre>' + markdown._COPY_BUTTON
        + "</div>")
    assert markdown.render_html("```rust\nfn x() {} // <b>\n```") == (
        '<div class="code-block"><pre><code class="language-rust">fn x() {} // &lt;b&gt;</code></pre>'
        + markdown._COPY_BUTTON + "</div>")
    # A string still being written keeps its colour to the end of the line.
    assert '<span class="hl-s">&quot;open</span>' in markdown.render_html('```py\nx = "open', partial=True)


def visible(rendering: str) -> str:
    rendering = re.sub(r"<pre>.*?</pre>|<code[^>]*>.*?</code>|<table>.*?</table>", " ", rendering, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", rendering))


def test_a_streamed_table_only_ever_shows_complete_rows() -> None:
    shown: list[str] = []
    boxes_seen = 0
    for end in range(len(RICH_ANSWER) + 1):
        prefix = RICH_ANSWER[:end]
        rendered = markdown.render_html(prefix, partial=True)
        rows = re.findall(r"<tr>(.*?)</tr>", rendered)
        assert all(len(re.findall(r"<t[hd][ >]", row)) == 3 for row in rows), (prefix, rows)
        assert rows[:len(shown)] == shown, ("a row changed once shown", prefix)  # rows arrive whole
        shown = rows
        boxes = rendered.count('type="checkbox"')
        assert boxes >= boxes_seen, prefix
        boxes_seen = boxes
        pending = re.search(r"(?:^|\n)[ \t]*\|[^\n]*\n$", prefix)  # a `|` line may yet head a table
        if not pending:
            assert not re.search(r"[|$]", visible(rendered)), (prefix, visible(rendered))
    assert len(shown) == 5 and boxes_seen == 3


def test_a_block_past_the_bound_stays_plain_in_both_renderers() -> None:
    from responses_app.highlight import MAX_CHARS, highlight

    assert 'class="hl-k"' in highlight("def f(): pass\n" * 10, "python")
    long = "def f(): pass\n" * (MAX_CHARS // 14 + 1)
    assert "hl-" not in highlight(long, "python") and highlight(long, "python").startswith("def f()")
    astral = "😀" * MAX_CHARS  # as many code points as the bound, twice as many UTF-16 units
    assert highlight(astral + " def", "python").endswith('<span class="hl-k">def</span>') is False
    assert highlight(astral[:-4] + "def", "python").endswith('<span class="hl-k">def</span>')

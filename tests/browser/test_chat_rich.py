"""Rich answers in Chromium at 1280 and 390 px: `sim-rich` streams a table, a blockquote, a task
list, Python code and math (typeset as MathML; tests/browser/test_chat_math.py has the details).
Sampled every animation frame, the table only ever shows complete rows
(a row once shown never changes: no half row that fills in and reflows) and grows row by row, and
no frame shows a table's pipes or a task's brackets as text. Finished, the answer has each
construct, the task boxes are disabled and labelled, axe-core finds nothing serious, and a wide
table scrolls inside its own frame, not the page."""

from __future__ import annotations

from typing import Any

import pytest

from .axe import assert_accessible
from .test_chat import submit_first_prompt, turn, wait_completed
from .test_chat_page import FAST, WIDTHS, no_console_errors, send_reply, sized

pytestmark = pytest.mark.browser

SAMPLE = """() => {
    window.richFrames = [];
    const sample = () => {
        const md = document.querySelector("#turns article.turn:last-of-type .block-text .md");
        if (md) {
            const rows = Array.from(md.querySelectorAll("table tr"),
                                    (tr) => Array.from(tr.children, (cell) => cell.innerText));
            const prose = Array.from(md.querySelectorAll(":scope > p, li, blockquote p"),
                                     (el) => el.innerText).join("\\n");
            window.richFrames.push({rows, prose, boxes: md.querySelectorAll("input[type=checkbox]").length,
                                    quotes: md.querySelectorAll("blockquote").length});
        }
        requestAnimationFrame(sample);
    };
    requestAnimationFrame(sample);
}"""

WIDE = "| " + " | ".join(f"column{n}" for n in range(24)) + " |\\n|" + "---|" * 24 + "\\n| " + " | ".join(
    f"value{n}" for n in range(24)) + " |"


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_rich_answer_streams_whole_rows_and_finishes_with_every_construct(sessions: Any, width: int) -> None:
    page = sized(sessions("alice"), width)
    wait_completed(page, submit_first_prompt(page, "Warm up", metadata=FAST))
    page.evaluate(SAMPLE)
    rich = send_reply(page, "Show me everything", model="sim-rich", metadata={"sim.tokens_per_s": "60",
                                                                             "sim.seed": "3"})
    wait_completed(page, rich)
    frames = page.evaluate("() => window.richFrames")
    assert len(frames) > 40, "sampled while it streamed"
    counts = [len(f["rows"]) for f in frames]
    assert all(len(cells) == 3 for f in frames for cells in f["rows"]), "a frame showed a row short of cells"
    for before, after in zip(frames, frames[1:], strict=False):  # a row, once shown, never changes
        assert after["rows"][:len(before["rows"])] == before["rows"], (before["rows"], after["rows"])
    # Row by row: several counts between none and all of them (a frame may miss one on a busy machine).
    assert len({c for c in counts if 0 < c < max(counts)}) >= 2, f"the table grew row by row: {sorted(set(counts))}"
    for f in frames:
        assert "|" not in f["prose"] and "[ ]" not in f["prose"] and "[x]" not in f["prose"], f["prose"][-200:]
    boxes = [f["boxes"] for f in frames]
    assert boxes == sorted(boxes) and boxes[-1] == 3

    answer = turn(page, rich).locator(".block-text .md")
    assert answer.locator("table thead th").all_inner_texts() == ["Construct", "Streams", "Notes"]
    assert answer.locator("table tbody tr").count() == 4
    assert answer.locator("th.md-center").count() == 1 and answer.locator("td.md-right").count() == 4
    assert answer.locator("blockquote li").count() == 2
    assert answer.locator("pre code.language-python").count() == 1
    assert answer.locator("span.md-math > math").count() == 3, "the math is typeset (math.js)"
    assert answer.locator("span.md-math-display > math").count() == 1 and answer.locator("code.md-math").count() == 0
    boxes_done = answer.get_by_role("checkbox")
    assert boxes_done.count() == 3
    assert [boxes_done.nth(n).is_checked() for n in range(3)] == [True, True, False]
    assert all(boxes_done.nth(n).is_disabled() for n in range(3))
    assert answer.get_by_role("checkbox", name="Typeset the math").count() == 1  # labelled by its text
    assert_accessible(page, "#turns")

    # A table wider than a phone scrolls inside its frame, the page never sideways.
    page.evaluate("""([id, text]) => {
        const md = document.querySelector(`article.turn[data-request-id="${id}"] .block-text .md`);
        md.insertAdjacentHTML("beforeend", window.relayChat.renderMarkdown(text));
    }""", [rich, WIDE.replace("\\n", "\n")])
    wide = answer.locator(".md-table").last
    assert wide.evaluate("el => el.scrollWidth > el.clientWidth"), "the wide table overflows its frame"
    assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    no_console_errors(page)

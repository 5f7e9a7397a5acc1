"""Math typeset in Chromium at 1280 and 390 px (chat/math.js, temml). `sim-text` says the prompt back,
so an answer holds inline math, display math and TeX temml cannot read. Sampled every animation
frame, the live answer shows the formulas as MathML; after the server rendering is swapped in and
after a reload they are MathML again, with the TeX as annotation; the bad TeX stays code, titled
with why, and nothing is logged. Without JavaScript the same page shows the TeX as code. Copy
copies the Markdown. A formula wider than the page scrolls inside itself. axe-core finds nothing
serious in light or dark. A micro-measure: typesetting a drawn tail from the cache costs a small
fraction of a frame (figures in bench/README.md)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .axe import assert_accessible
from .conftest import RelayServer
from .test_chat import submit_first_prompt, turn, wait_completed
from .test_chat_page import FAST, WIDTHS, no_console_errors, send_reply, sized

pytestmark = pytest.mark.browser

INLINE = r"e^{i\pi}+1=0"
DISPLAY = r"\sum_{k=1}^{n} k"
BAD = r"\nosuch{x}"
PROMPT = f"Euler: ${INLINE}$, sum: $${DISPLAY}$$, bad: ${BAD}$"  # said back whole: 80 characters at most
ANSWER = "#turns article.turn:last-of-type .block-text .md"

SAMPLE = """answer => {
    window.mathFrames = [];
    const sample = () => {
        const md = document.querySelector(answer);
        const turn = md && md.closest("article.turn");
        if (md && turn.dataset.live !== undefined) {
            window.mathFrames.push({
                math: md.querySelectorAll("span.md-math > math").length,
                display: md.querySelectorAll("span.md-math-display > math[display=block]").length,
                bad: md.querySelectorAll("code.md-math[data-math-error]").length,
            });
        }
        requestAnimationFrame(sample);
    };
    requestAnimationFrame(sample);
}"""

# Per frame the live drawing renders the tail again and typesets it: the same formulas, from the cache.
MEASURE = """text => {
    const {renderMarkdown, typeset} = window.relayChat;
    const template = document.createElement("template");
    const html = renderMarkdown(text);
    const time = (withMath, rounds) => {
        const start = performance.now();
        for (let i = 0; i < rounds; i++) {
            template.innerHTML = html;
            if (withMath) typeset(template.content);
        }
        return (performance.now() - start) / rounds;
    };
    time(true, 20);  // warm: the cache holds these formulas
    const fresh = Array.from({length: 50}, (_, i) => `$\\frac{a_{${i}}}{b} + \\sqrt{x^{${i}} + y}$`).join(" ");
    template.innerHTML = renderMarkdown(`Cold: ${fresh}`);
    const start = performance.now();
    typeset(template.content);  // formulas not seen before: temml parses each
    const miss = (performance.now() - start) / 50;
    return {plain: time(false, 300), typeset: time(true, 300), miss,
            formulas: (html.match(/class="md-math/g) || []).length};
}"""

WIDE = "$$" + r" \qquad ".join([r"\sum_{k=1}^{n} a_k x^k"] * 14) + "$$"


def typeset_state(page: Page, request_id: str) -> dict[str, Any]:
    return dict(turn(page, request_id).locator(".block-text .md").evaluate("""md => ({
        math: md.querySelectorAll("span.md-math > math").length,
        display: md.querySelectorAll("span.md-math-display > math[display=block]").length,
        tex: Array.from(md.querySelectorAll("annotation[encoding='application/x-tex']"), (a) => a.textContent),
        bad: Array.from(md.querySelectorAll("code.md-math"), (c) => [c.textContent, c.title, "mathError" in c.dataset]),
    })"""))


def expected_typeset(state: dict[str, Any]) -> None:
    assert state["math"] == 2 and state["display"] == 1, state
    assert state["tex"] == [INLINE, DISPLAY], "the TeX is the MathML's annotation"
    [(tex, title, marked)] = state["bad"]
    assert tex == BAD and marked and title.startswith("Not typeset: ") and "nosuch" in title, state["bad"]


def without_javascript(page: Page, request_id: str) -> list[str]:
    response = page.request.get(page.url.split("#")[0])
    static = page.context.new_page()
    try:
        static.set_content(response.text().replace('<script type="module"', '<script type="text/plain"'))
        codes = static.locator(f'article.turn[data-request-id="{request_id}"] .block-text .md code.md-math')
        return codes.all_text_contents()
    finally:
        static.close()


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_math_is_typeset_live_after_the_swap_and_on_load(sessions: Any, relay_server: RelayServer,
                                                         width: int) -> None:
    alice = sessions("alice")
    alice.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = sized(alice, width)
    wait_completed(page, submit_first_prompt(page, "Warm up", metadata=FAST))
    page.evaluate(SAMPLE, ANSWER)
    answer = send_reply(page, PROMPT, metadata={"sim.tokens_per_s": "40", "sim.seed": "4"})
    wait_completed(page, answer)

    frames = page.evaluate("() => window.mathFrames")
    assert frames, "sampled while it streamed"
    typeset_live = [f for f in frames if f["math"] == 2 and f["display"] == 1 and f["bad"] == 1]
    assert len(typeset_live) > 10, f"the live answer showed MathML: {frames[-5:]}"
    assert turn(page, answer).get_attribute("data-finished") == "1", "the server rendering is in"
    expected_typeset(typeset_state(page, answer))

    markdown = relay_server.request_row(answer)["final_text"]
    assert f"${INLINE}$" in markdown and f"$${DISPLAY}$$" in markdown
    copy = turn(page, answer).locator("button[data-copy=answer]")
    copy.click()
    expect(copy).to_have_attribute("data-copied", "ok")
    assert page.evaluate("() => navigator.clipboard.readText()") == markdown, "Copy gives the Markdown"

    assert without_javascript(page, answer) == [INLINE, DISPLAY, BAD], "without JavaScript: the TeX as code"

    page.reload()
    expect(turn(page, answer).locator(".block-text .md span.md-math > math")).to_have_count(2)
    expected_typeset(typeset_state(page, answer))

    # A formula wider than the page scrolls inside its own box, from its first symbol.
    page.evaluate("""([selector, text]) => {
        const md = document.querySelector(selector);
        const holder = document.createElement("div");
        holder.innerHTML = window.relayChat.renderMarkdown(text);
        md.append(...window.relayChat.typeset(holder).childNodes);
    }""", [f'article.turn[data-request-id="{answer}"] .block-text .md', WIDE])
    wide = turn(page, answer).locator("span.md-math-display").last
    expect(wide.locator("annotation")).to_have_text(WIDE.strip("$"))
    box = wide.evaluate("""el => {
        el.scrollLeft = 0;
        const frame = el.getBoundingClientRect(), math = el.firstElementChild.getBoundingClientRect();
        return {scrolls: el.scrollWidth > el.clientWidth, left: math.left - frame.left, right: frame.right,
                fits: frame.right <= document.documentElement.clientWidth};
    }""")
    assert box["scrolls"] and box["left"] >= 0 and box["fits"], box
    assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")

    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
        assert_accessible(page, "#turns")
        colour = page.evaluate("""id => {
            const md = document.querySelector(`article.turn[data-request-id="${id}"] .block-text .md`);
            return [getComputedStyle(md).color, getComputedStyle(md.querySelector("span.md-math mi")).color];
        }""", answer)
        assert colour[0] == colour[1], f"the math is in the text's colour ({scheme}): {colour}"

    measured = page.evaluate(MEASURE, markdown)
    print(f"\ntypeset per drawn tail at {width} px: {measured}")
    assert measured["formulas"] == 3 and measured["miss"] > 0
    assert measured["typeset"] - measured["plain"] < 1.0, f"typesetting from the cache costs a frame: {measured}"
    no_console_errors(page)

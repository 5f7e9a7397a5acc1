"""Continue and Regenerate with another model, in Chromium at desktop and phone widths: a cut-short
answer goes on in the same turn, the answer so far staying where it was, and reads as one answer
after a reload; Regenerate with another model makes a new version with that model. axe reports
nothing serious or critical on either."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .axe import assert_accessible
from .conftest import RelayServer
from .test_chat import submit_first_prompt, wait_completed
from .test_chat_page import WIDTHS, no_console_errors, sized

pytestmark = pytest.mark.browser

PACE = {"sim.tokens_per_s": "80", "sim.seed": "5"}


def document_top(page: Page, selector: str) -> float:
    return float(page.evaluate("s => document.querySelector(s).getBoundingClientRect().top + scrollY", selector))


PLACE = """([name, block]) => {
    const turn = document.getElementById(name);
    const meta = turn.querySelector(".turn-meta").getBoundingClientRect();
    const first = turn.querySelector(block).getBoundingClientRect();
    const blocks = turn.querySelectorAll(`${block.split(" ")[0]} > .block`);
    const last = blocks[blocks.length - 1].getBoundingClientRect();
    return {turn: turn.getBoundingClientRect().top + scrollY, under: first.top - meta.bottom, seen: last.bottom};
}"""


# `place` in the first frame that shows `block`, into window.placeShown.
WATCH_PLACE = """([name, block]) => {
    const place = """ + PLACE + """;
    const look = () => document.querySelector(`#${name} ${block}`)
        ? (window.placeShown = place([name, block])) : requestAnimationFrame(look);
    look();
}"""


def place(page: Page, name: str, block: str) -> dict[str, float]:
    """Where the turn stands in the document, and where its answer's first block stands under the
    turn's line of badges and buttons (that line is shorter while an answer is written), and where
    the end of the answer so far is in the window."""
    return dict(page.evaluate(PLACE, [name, block]))


def no_sideways_scroll(page: Page) -> None:
    assert page.evaluate("() => document.scrollingElement.scrollWidth <= innerWidth"), "no horizontal scrolling"


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_continue_appends_to_the_same_answer_in_place(sessions: Any, relay_server: RelayServer, width: int) -> None:
    page = sized(sessions("alice"), width)
    first = submit_first_prompt(page, "Tell me about rivers", model="sim-incomplete", metadata=PACE)
    article = page.locator("article.turn")
    expect(article.locator("[data-badge]")).to_have_attribute("data-badge", "incomplete", timeout=30_000)
    expect(article).to_have_attribute("data-finished", "1")  # the server rendering swapped in
    name = article.get_attribute("id")
    so_far = article.locator("[data-blocks]").inner_text().strip()
    assert so_far
    before = place(page, name, "[data-blocks] .block")
    assert_accessible(page, f"#{name}")
    # Measured in the first frame that shows the answer so far above the continuation: later, the
    # window may have followed the new text down, as it should for a reader at the bottom.
    page.evaluate(WATCH_PLACE, [name, "[data-earlier] .block"])
    article.get_by_role("button", name="Continue this answer").click()
    # The same turn follows the continuation: the answer so far stays where it was, above it.
    expect(article).to_have_count(1)
    expect(article).not_to_have_attribute("data-request-id", first)
    continuation = str(article.get_attribute("data-request-id"))
    assert article.get_attribute("id") == name
    expect(article.locator("[data-earlier]")).to_have_count(1)
    during = dict(page.wait_for_function("() => window.placeShown").json_value())
    assert abs(during["turn"] - before["turn"]) < 1 and abs(during["under"] - before["under"]) < 1, (before, during)
    # In the window the answer so far moves by no more than a line of buttons (the live turn's
    # line is shorter, and a reader at the bottom stays at the bottom).
    assert abs(during["seen"] - before["seen"]) < 64, (before, during)
    wait_completed(page, continuation)
    expect(article).to_have_attribute("data-finished", "1")  # the whole answer's server rendering
    expect(article.locator("[data-earlier]")).to_have_count(0)
    joined = article.locator("[data-blocks]").inner_text().strip()
    assert joined.startswith(so_far) and len(joined) > len(so_far) + 20, (so_far, joined)
    expect(article.get_by_role("button", name="Continue this answer")).to_have_count(0)
    after = place(page, name, "[data-blocks] .block")
    assert abs(after["turn"] - before["turn"]) < 1 and abs(after["under"] - before["under"]) < 1, (before, after)
    no_sideways_scroll(page)
    assert_accessible(page, f"#{name}")
    # One turn, one answer after a reload too, and the row of the first part is not a turn of its own.
    page.reload()
    expect(page.locator("article.turn")).to_have_count(1)
    assert page.locator("article.turn [data-blocks]").inner_text().strip() == joined
    (continued,) = relay_server.query("SELECT continues_id FROM responses_app_responserequest WHERE id = ?",
                                      continuation.replace("-", ""))
    assert continued[0].replace("-", "") == first.replace("-", "")
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_regenerate_with_another_model_makes_a_version_with_it(sessions: Any, relay_server: RelayServer,
                                                               width: int) -> None:
    page = sized(sessions("bob"), width)
    first = submit_first_prompt(page, "Explain tides", model="sim-text", metadata={"sim.tokens_per_s": "400"})
    wait_completed(page, first)
    article = page.locator("article.turn")
    article.locator("summary", has_text="Other model").click()
    choice = article.locator("input[name=model][value=sim-reasoning]")
    expect(choice).to_be_visible()
    described = article.locator(".model-choice", has=page.locator("input[value=sim-reasoning]"))
    expect(described).to_contain_text("Thinks first, then answers.")
    no_sideways_scroll(page)
    assert_accessible(page, f"#{article.get_attribute('id')}")
    choice.check()
    article.get_by_role("button", name="Regenerate with this model").click()
    expect(page.locator("article.turn")).to_have_count(1)
    expect(page.locator("article.turn")).not_to_have_attribute("data-request-id", first, timeout=15_000)
    regenerated = str(page.locator("article.turn").get_attribute("data-request-id"))
    shown = page.locator(f'article.turn[data-request-id="{regenerated}"]')
    expect(shown.locator("[data-version-count]")).to_have_text("2/2")
    expect(shown.locator(".turn-meta")).to_contain_text("sim-reasoning")
    wait_completed(page, regenerated)
    assert relay_server.query("SELECT model FROM responses_app_responserequest WHERE id = ?",
                              regenerated.replace("-", "")) == [("sim-reasoning",)]
    assert re.search(r"/c/[0-9a-f-]+/", page.url)
    no_console_errors(page)

"""The chat page while an answer streams, in Chromium at 1280 and 390 px: Stop keeps the reader
where they are; Copy (an answer as Markdown, a code block, a tool's code and logs) through the
clipboard API, by mouse and keyboard; an honest connection state within 5 s of losing the network
(the browser's offline mode); retries and every outcome worded and coloured apart; and streaming
Markdown that never shows half-built syntax."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .conftest import RelayServer
from .test_chat import answer_text, live_text, server_text, submit_first_prompt, turn, wait_completed, wait_for_text
from .test_chat_page import FAST, WIDTHS, geometry, no_console_errors, send_reply, sized

pytestmark = pytest.mark.browser

RECORD = """([selector, into]) => {
    window[into] = [];
    const seen = () => {
        const value = document.querySelector(selector)?.textContent.trim();
        if (value !== undefined && window[into].at(-1) !== value) window[into].push(value);
    };
    new MutationObserver(seen).observe(document.body, {subtree: true, childList: true, characterData: true});
    seen();
}"""


# The paragraph in the middle of the window, and where it is; then where that paragraph is now.
READ = """() => {
    const all = Array.from(document.querySelectorAll("#turns article.turn:last-of-type :is(p, li)"));
    const index = all.findIndex((el) => el.getBoundingClientRect().top >= innerHeight / 4);
    return {index, text: all[index].textContent, top: all[index].getBoundingClientRect().top};
}"""
FIND = """index => {
    const p = document.querySelectorAll("#turns article.turn:last-of-type :is(p, li)")[index];
    return p ? {text: p.textContent, top: p.getBoundingClientRect().top} : null;
}"""


def record(page: Page, selector: str, into: str) -> None:
    """Every text the element at `selector` shows from now on, in `window[into]`."""
    page.evaluate(RECORD, [selector, into])


def badge_of(page: Page, request_id: str) -> Any:
    return turn(page, request_id).locator("[data-badge]")


def finished(page: Page, request_id: str) -> None:
    expect(turn(page, request_id)).to_have_attribute("data-finished", "1")


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_stop_keeps_the_reader_where_they_are_and_the_partial_answer(sessions: Any, relay_server: RelayServer,
                                                                      width: int) -> None:
    page = sized(sessions("alice"), width, 700)
    first = submit_first_prompt(page, "Warm up", metadata=FAST)
    wait_completed(page, first)
    slow = {"sim.tokens_per_s": "80", "sim.seed": "5", "sim.tokens": "3000"}
    stop = page.locator("#composer [data-stop-latest]")
    expect(stop).to_be_hidden()  # nothing streams

    # At the bottom, following the answer: Stop in the composer, and the page stays at the bottom.
    following = send_reply(page, "A long answer", metadata=slow, model="sim-long")
    # Fold Advanced by keyboard: Playwright's click scrolls a target it finds moving (the page
    # follows the answer) into view first, which no person's tap does, and the page then rightly
    # stops following.
    page.focus("#composer details.advanced > summary")
    page.keyboard.press("Enter")
    expect(page.locator("#composer details.advanced")).not_to_have_attribute("open", "")
    wait_for_text(page, following, 700)
    expect(stop).to_be_visible()
    at_stop = geometry(page, following)
    assert at_stop["fromBottom"] <= 48, at_stop
    stop.focus()  # by keyboard
    page.keyboard.press("Enter")
    expect(badge_of(page, following)).to_have_attribute("data-badge", "cancelled")
    expect(badge_of(page, following)).to_have_text("Stopped")
    finished(page, following)
    # The button went away under the focus: it is on the answer that was stopped, not lost to the page.
    expect(turn(page, following)).to_be_focused()
    after = geometry(page, following)
    assert after["fromBottom"] <= 48 and after["scrollY"] >= at_stop["scrollY"] - 2, (at_stop, after)
    expect(page.locator("[data-jump]")).to_be_hidden()
    kept = answer_text(page, following)
    assert len(kept) >= 700 and kept == server_text(page, following), "the partial answer stays"
    assert relay_server.request_row(following)["status"] == "cancelled"
    expect(stop).to_be_hidden()

    # Reading further up: the words in view stay in view through Stop and the swap that follows.
    reading = send_reply(page, "Another long answer", metadata=slow, model="sim-long")
    wait_for_text(page, reading, 1500)
    page.mouse.move(width / 2, 200)
    page.mouse.wheel(0, -350)
    expect(page.locator("[data-jump]")).to_be_visible()
    page.wait_for_timeout(200)
    held = page.evaluate(READ)
    stop.click()
    finished(page, reading)
    page.wait_for_timeout(300)
    now = page.evaluate(FIND, held["index"])
    assert now["text"] == held["text"] and abs(now["top"] - held["top"]) <= 2, f"the words moved: {held} {now}"
    no_console_errors(page)


def clipboard(page: Page) -> str:
    return str(page.evaluate("() => navigator.clipboard.readText()"))


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_copy_an_answer_a_code_block_and_a_tools_output(sessions: Any, relay_server: RelayServer,
                                                        width: int) -> None:
    alice = sessions("alice")
    alice.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = sized(alice, width)
    prompt = "Copy **this** and [a link](https://example.org/x)"
    answer = submit_first_prompt(page, prompt, metadata=FAST)
    wait_completed(page, answer)
    copy = turn(page, answer).locator("button[data-copy=answer]")
    expect(copy).to_be_visible()
    copy.click()
    expect(copy).to_have_attribute("data-copied", "ok")
    assert copy.evaluate("b => getComputedStyle(b, '::before').content") == '"Copied ✓"'
    expect(copy).not_to_have_attribute("data-copied", "ok", timeout=5000)  # brief
    markdown = relay_server.request_row(answer)["final_text"]
    assert clipboard(page) == markdown and "[a link](https://example.org/x)" in markdown, "as Markdown"

    tools = send_reply(page, "Compute", model="sim-code-interpreter", metadata=FAST)
    wait_completed(page, tools)
    tool = turn(page, tools).locator("details.block-tool").first
    tool.locator("summary").click()
    code = tool.locator(".tool-code button[data-copy]")
    code.focus()  # by keyboard
    page.keyboard.press("Enter")
    expect(code).to_have_attribute("data-copied", "ok")
    assert clipboard(page) == tool.locator(".tool-code pre").text_content() != ""
    logs = tool.locator(".tool-detail", has_text="logs")
    expect(logs.locator("pre")).to_have_text("mean=3.875 stdev=2.800\n")  # text, not a JSON array
    logs.locator("button[data-copy]").focus()
    page.keyboard.press("Space")
    expect(logs.locator("button[data-copy]")).to_have_attribute("data-copied", "ok")
    assert clipboard(page) == "mean=3.875 stdev=2.800\n"

    # A fenced block in an answer: the renderer's own markup and the page's one click handler.
    page.evaluate("""id => {
        const md = document.querySelector(`article.turn[data-request-id="${id}"] .block-text .md`);
        md.insertAdjacentHTML("beforeend", window.relayChat.renderMarkdown("```sh\\nmake run PORT=8001\\n```"));
    }""", answer)
    block = turn(page, answer).locator(".code-block")
    block.locator("button[data-copy=code]").click()
    expect(block.locator("button[data-copy=code]")).to_have_attribute("data-copied", "ok")
    assert clipboard(page) == "make run PORT=8001"
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_lost_network_reads_reconnecting_within_5_s_then_live(sessions: Any, relay_server: RelayServer,
                                                                width: int) -> None:
    alice = sessions("alice")
    page = sized(alice, width)
    request_id = submit_first_prompt(page, "Lose the network",
                                     metadata={"sim.tokens_per_s": "40", "sim.tokens": "500", "sim.seed": "3"})
    wait_for_text(page, request_id, 40)
    conn = turn(page, request_id).locator("[data-conn]")
    expect(conn).to_have_text("Live")
    expect(turn(page, request_id)).to_have_attribute("aria-busy", "true")
    page.evaluate("""() => {
        const conn = document.querySelector("[data-conn]");
        new MutationObserver(() => { if (conn.textContent === "Reconnecting…") window.told ??= Date.now(); })
            .observe(conn, {childList: true});
        window.lost = Date.now();
    }""")
    alice.context.set_offline(True)
    expect(conn).to_have_text("Reconnecting…", timeout=6000)
    told = page.evaluate("() => window.told - window.lost")
    assert told <= 5000, f"told after {told} ms"
    expect(turn(page, request_id)).to_have_class(re.compile("reconnecting"))
    page.wait_for_timeout(2000)
    alice.context.set_offline(False)
    expect(conn).to_have_text("Live", timeout=10_000)
    wait_completed(page, request_id)
    assert live_text(page, request_id) == answer_text(page, request_id) == server_text(page, request_id)
    assert relay_server.request_row(request_id)["reconnects"] >= 1
    expect(turn(page, request_id).locator("[data-conn]")).to_have_count(0)  # an ended turn follows nothing


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_retries_and_every_outcome_read_apart(sessions: Any, relay_server: RelayServer, width: int) -> None:
    page = sized(sessions("bob"), width)
    first = submit_first_prompt(page, "Warm up", metadata=FAST)
    wait_completed(page, first)
    record(page, "#turns article.turn:last-of-type [data-badge]", "badges")
    refused = send_reply(page, "Rate limited", metadata={**FAST, "sim.http_error": "429"})
    expect(badge_of(page, refused)).to_have_attribute("data-badge", "error", timeout=30_000)
    seen = page.evaluate("() => window.badges")
    assert "Retrying (429, 2 of 3)…" in seen and "Retrying (429, 3 of 3)…" in seen, seen
    assert seen[-1] == "Error" and "Thinking…" not in seen[seen.index("Retrying (429, 2 of 3)…"):], seen
    expect(turn(page, refused).locator("[data-error]")).to_contain_text("rate_limit_exceeded")
    assert relay_server.request_row(refused)["status"] == "error"

    failed = send_reply(page, "Fail", model="sim-failed", metadata=FAST)
    expect(badge_of(page, failed)).to_have_attribute("data-badge", "failed")
    expect(badge_of(page, failed)).to_have_text("Failed")
    colours = [badge_of(page, r).evaluate("b => getComputedStyle(b).color") for r in (first, refused, failed)]
    assert len(set(colours)) == 3, f"completed, error and failed share a colour: {colours}"
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_streaming_markdown_never_shows_half_built_syntax(sessions: Any, width: int) -> None:
    page = sized(sessions("alice"), width)
    first = submit_first_prompt(page, "Warm up", metadata=FAST)
    wait_completed(page, first)
    page.evaluate("""() => {
        window.frames_seen = [];
        const sample = () => {
            const boxes = document.querySelectorAll("#turns article.turn:last-of-type .block-text .md");
            for (const box of boxes) window.frames_seen.push(box.innerText);
            requestAnimationFrame(sample);
        };
        requestAnimationFrame(sample);
    }""")
    pace = {"sim.tokens_per_s": "30", "sim.seed": "4"}
    asked = send_reply(page, "See **SSE**, `EventSource` and [the spec](https://example.org/sse)", metadata=pace)
    wait_completed(page, asked)
    cited = send_reply(page, "Sources for server-sent events", metadata=pace, model="sim-citations")
    wait_completed(page, cited)
    frames = [f for f in page.evaluate("() => window.frames_seen") if f.strip()]
    assert len(frames) > 40, "sampled while it streamed"
    for text in frames:
        assert not re.search(r"\*\*|`|\]\(|\[|https?://", text), text[-200:]
    assert "See SSE, EventSource and the spec" in answer_text(page, asked)
    assert "(html.spec.whatwg.org)" in answer_text(page, cited)
    no_console_errors(page)

"""The chat pages for keyboards, screen readers and thumbs, in Chromium at 1280 and 390 px: axe-core
finds nothing serious on the list, chat and analytics pages; the streaming turn is aria-busy and
its start and end are announced once; every control shows a focus ring and is a 44 px target on a
phone; Escape closes Edit and Rename; the focus stays in the composer after sending; an over-long
prompt is refused before it is sent, with the count shown; titles are plain text; the composer
covers nothing at the end of a page; badges, Approve/Deny and the model picker are styled and whole."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from responses_app.forms import MAX_INPUT_CHARS

from .axe import assert_accessible
from .conftest import RelayServer
from .test_chat import submit_first_prompt, turn, wait_completed, wait_for_text
from .test_chat_page import FAST, WIDTHS, no_console_errors, send_reply, sized

pytestmark = pytest.mark.browser


def ready(page: Page) -> None:
    page.wait_for_function("() => document.querySelector('.relay.relay-js') !== null")


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_axe_finds_nothing_serious_on_the_list_chat_and_analytics_pages(sessions: Any, width: int) -> None:
    page = sized(sessions("boss"), width)
    cited = submit_first_prompt(page, "How do rivers form?", model="sim-citations", metadata=FAST)
    wait_completed(page, cited)
    for model in ("sim-reasoning", "sim-code-interpreter", "sim-refusal"):
        wait_completed(page, send_reply(page, f"Try {model}", model=model, metadata=FAST))
    page.click("#composer details.advanced > summary")  # fold Advanced
    pace = {"sim.tokens_per_s": "40", "sim.tokens": "600"}
    streaming = send_reply(page, "Keep going", model="sim-long", metadata=pace)
    wait_for_text(page, streaming, 40)
    assert_accessible(page)  # with an answer streaming
    wait_completed(page, streaming)
    page.locator("details.block-tool summary").first.click()
    assert_accessible(page)
    for path in ("/", "/analytics/"):
        page.goto(path)
        ready(page)
        assert_accessible(page)
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_streaming_turn_is_busy_and_announced_once(sessions: Any, width: int) -> None:
    page = sized(sessions("alice"), width)
    first = submit_first_prompt(page, "Warm up", metadata=FAST)
    wait_completed(page, first)
    assert page.locator("#turns").get_attribute("aria-live") is None, "no announcement per token"
    expect(page.locator("[data-announce]")).to_have_text("Answer completed")  # the first one's end
    page.evaluate("""() => {
        window.said = [];
        const region = document.querySelector("[data-announce]");
        new MutationObserver(() => { if (region.textContent) window.said.push(region.textContent); })
            .observe(region, {childList: true, characterData: true, subtree: true});
    }""")
    request_id = send_reply(page, "Stream for a while", metadata={"sim.tokens_per_s": "60", "sim.tokens": "200"})
    wait_for_text(page, request_id, 30)
    expect(turn(page, request_id)).to_have_attribute("aria-busy", "true")
    wait_completed(page, request_id)
    expect(turn(page, request_id)).not_to_have_attribute("aria-busy", "true")
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.said") == ["Answer started", "Answer completed"]
    expect(page.locator("[data-announce]")).to_have_attribute("role", "status")
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_every_control_shows_focus_and_is_a_44px_target_on_a_phone(sessions: Any, width: int) -> None:
    page = sized(sessions("alice"), width)
    request_id = submit_first_prompt(page, "Roll the dice", model="sim-mcp-approval", metadata=FAST)
    expect(turn(page, request_id).locator(".approval button[data-approve=true]")).to_be_visible(timeout=20_000)
    page.locator("body").click(position={"x": 2, "y": 2})
    rings: dict[str, str] = {}
    after_composer = 0  # the sidebar's conversations come first, as many as the session has made
    for _ in range(150):
        if any("composer-input" in html for html in rings):
            after_composer += 1
            if after_composer > 20:  # and every control after the message box
                break
        page.keyboard.press("Tab")
        focused = page.evaluate("""() => {
            const el = document.activeElement;
            if (!el || el === document.body || !el.closest(".relay")) return null;
            const ring = el.matches(".composer > textarea") ? el.closest(".composer") : el;
            const style = getComputedStyle(ring);
            return [el.outerHTML.slice(0, 80), `${style.outlineStyle} ${style.outlineWidth}`];
        }""")
        if focused:
            rings[focused[0]] = focused[1]
    assert len(rings) >= 8, rings
    flat = {html: ring for html, ring in rings.items() if not ring.startswith("solid") or ring.endswith(" 0px")}
    assert not flat, f"no visible focus ring: {flat}"
    assert any("composer-input" in html for html in rings), "the composer is reached"
    if width <= 640:
        small = page.evaluate("""() => Array.from(document.querySelectorAll(".relay *"))
            .filter((el) => el.matches("button, a.back, select, summary, .conversations a") && el.offsetParent)
            .map((el) => [el.outerHTML.slice(0, 60), el.getBoundingClientRect()])
            .filter(([, r]) => r.height < 44 || (r.width < 44))
            .map(([html, r]) => `${html} ${Math.round(r.width)}x${Math.round(r.height)}`)""")
        assert not small, small
    page.locator(".approval button[data-approve=true]").click()
    wait_completed(page, request_id)
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_escape_closes_edit_and_rename_and_focus_stays_in_the_composer(sessions: Any, width: int) -> None:
    page = sized(sessions("bob"), width)
    first = submit_first_prompt(page, "**Plain** title, `please`", metadata=FAST)
    expect(page.locator("#composer-input")).to_be_focused()  # the first send: the new answer is announced
    expect(page.locator("h1[data-title]")).to_have_text("Plain title, please")
    wait_completed(page, first)
    second = send_reply(page, "And again", metadata=FAST)
    expect(page.locator("#composer-input")).to_be_focused()
    wait_completed(page, second)

    edit = turn(page, first).get_by_role("button", name="Edit")
    edit.click()
    expect(page.locator(f"#edit-{first}")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator(f"#edit-form-{first}")).to_be_hidden()
    expect(edit).to_be_focused()
    expect(edit).to_have_attribute("aria-expanded", "false")
    rename = page.get_by_role("button", name="Rename")
    rename.click()
    expect(page.locator("#rename-title")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#rename-form")).to_be_hidden()
    expect(rename).to_be_focused()
    page.goto("/")
    expect(page.locator(".conversations .title").first).to_have_text("Plain title, please")
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_an_overlong_prompt_is_refused_before_sending_with_the_count(sessions: Any, relay_server: RelayServer,
                                                                     width: int) -> None:
    page = sized(sessions("alice"), width)
    page.goto("/")
    ready(page)
    box = page.locator("#composer-input")
    assert box.get_attribute("data-max-chars") == str(MAX_INPUT_CHARS) and box.get_attribute("maxlength") is None
    count = page.locator("#composer [data-count]")
    box.fill("hello")
    expect(count).to_have_text("")  # the count appears near the limit (tests/browser/test_chat_keyboard.py)
    requests = relay_server.query("SELECT COUNT(*) FROM responses_app_responserequest")[0][0]
    pasted = "x" * 200_000
    box.fill(pasted)
    expect(count).to_have_text(f"200,000 / {MAX_INPUT_CHARS:,} · too long")
    expect(count).to_have_class(re.compile("over"))
    page.keyboard.press("Control+Enter")
    expect(page.locator("#composer button[type=submit]")).to_be_disabled()
    page.wait_for_timeout(500)
    assert page.url.endswith("/") and len(box.input_value()) == 200_000, "nothing is cut, nothing sent"
    assert "at most" in box.evaluate("el => el.validationMessage")

    answer = submit_first_prompt(page, "Short", metadata=FAST)
    wait_completed(page, answer)
    page.locator("#composer-input").fill(pasted)
    page.locator("#composer-input").press("Control+Enter")
    expect(page.locator("#composer button[type=submit]")).to_be_disabled()
    page.wait_for_timeout(500)
    expect(page.locator("article.turn")).to_have_count(1)
    assert relay_server.query("SELECT COUNT(*) FROM responses_app_responserequest")[0][0] == requests + 1
    page.locator("#composer-input").fill("y" * MAX_INPUT_CHARS)  # the limit itself is allowed
    expect(page.locator("#composer [data-count]")).not_to_have_class(re.compile("over"))
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_composer_never_covers_the_last_items(sessions: Any, width: int) -> None:
    alice = sessions("alice")
    page = sized(alice, width, 700)
    first = submit_first_prompt(page, "Cover me not", metadata=FAST)
    wait_completed(page, first)
    wait_completed(page, send_reply(page, "Once more", metadata=FAST))
    covered = """() => {
        const root = document.scrollingElement;
        root.scrollTop = root.scrollHeight;
        const composer = document.getElementById("composer").getBoundingClientRect();
        const items = document.querySelectorAll("#turns article.turn, .conversations li");
        const last = items[items.length - 1].getBoundingClientRect();
        return last.bottom - composer.top;
    }"""
    assert page.evaluate(covered) <= 1
    under = page.evaluate("""() => {
        // the last one a person can reach (not one folded away, as a closed note's Save button)
        const controls = [...document.querySelectorAll("#turns article.turn button, #turns article.turn summary")]
            .filter((c) => c.checkVisibility());
        const control = controls[controls.length - 1];
        document.scrollingElement.scrollTop = 0;
        control.scrollIntoView({block: "end"});  // as a focus or a test's click scrolls to it
        return control.getBoundingClientRect().bottom - document.getElementById("composer").getBoundingClientRect().top;
    }""")
    assert under <= 0, "a control scrolled to stays above the composer"
    token = page.evaluate("() => document.querySelector('input[name=csrfmiddlewaretoken]').value")
    for n in range(12):
        response = page.request.post("/api/requests", headers={"X-CSRFToken": token},
                                     data={"input": f"List item {n}", "model": "sim-text", "metadata": FAST})
        assert response.status in (200, 201), response.text()
    page.goto("/")
    ready(page)
    assert page.evaluate(covered) <= 1
    overlap = page.evaluate("""() => {
        const composer = document.getElementById("composer").getBoundingClientRect();
        return Array.from(document.querySelectorAll(".conversations li")).filter((li) => {
            const r = li.getBoundingClientRect();
            return r.bottom > composer.top && r.top < composer.bottom;
        }).length;
    }""")
    assert overlap == 0, "the list page's composer sits under the list, never over it"
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_badges_buttons_and_the_model_picker_are_styled_and_whole(sessions: Any, width: int) -> None:
    page = sized(sessions("bob"), width)
    request_id = submit_first_prompt(page, "Roll the dice", model="sim-mcp-approval", metadata=FAST)
    approve = turn(page, request_id).locator(".approval button[data-approve=true]")
    expect(approve).to_be_visible(timeout=20_000)
    looks = page.evaluate("""() => Object.fromEntries([".approval .approve", ".approval .deny", ".tool-state",
            "[data-badge]"].map((s) => { const st = getComputedStyle(document.querySelector(s));
            return [s, [st.backgroundColor, st.borderRadius, st.fontWeight]]; }))""")
    assert looks[".approval .approve"][0] == "rgb(21, 128, 61)", looks
    assert looks[".approval .deny"][0] != looks[".approval .approve"][0]
    for selector in (".tool-state", "[data-badge]"):
        assert looks[selector][0] not in ("rgba(0, 0, 0, 0)", "transparent"), looks
    expect(turn(page, request_id).locator(".tool-state", has_text="awaiting approval")).to_have_class(
        re.compile("state-awaiting-approval"))
    approve.click()
    wait_completed(page, request_id)
    cut = page.evaluate("""() => {
        const select = document.querySelector("#composer select[name=model]");
        const style = getComputedStyle(select);
        const g = document.createElement("canvas").getContext("2d");
        g.font = style.font;
        const widest = Math.max(...Array.from(select.options, (o) => g.measureText(o.text).width));
        const room = select.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 16;
        return widest - room;
    }""")
    assert cut <= 0, f"the longest model name is cut by {cut:.0f} px"
    no_console_errors(page)

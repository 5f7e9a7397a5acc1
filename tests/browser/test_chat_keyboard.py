"""The composer, the focus and the keyboard, in Chromium at desktop (1280x800, a mouse) and phone
(390x844, a touch screen) sizes: the focus stays in the message box after sending, so a follow-up
typed at once is whole; a skip link is every page's first focusable element and the chat page opens
in the message box where there is a mouse; Enter sends on a desktop and adds a line on a touch
screen; the count appears near the limit and Send is off over it, saying why; errors in words, tied
to their field and gone as the person types; Send keeps one place; the shortcuts and their help."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from responses_app.forms import MAX_INPUT_CHARS

from .axe import assert_accessible
from .conftest import PASSWORD, RelayServer
from .test_chat import submit_first_prompt, turn, wait_completed, wait_for_text, wait_until
from .test_chat_page import FAST

pytestmark = pytest.mark.browser

DEVICES = {"desktop": (1280, 800, False), "phone": (390, 844, True)}  # width, height, a touch screen
REFUSED = re.compile(r"status of 400 \(Bad Request\)")  # the refusals the tests provoke on purpose
FOCUSABLE = "a[href], button:not([disabled]), input:not([type=hidden]), select, textarea, summary, [tabindex]"
FIRST_FOCUSABLE = f"""() => {{
    const all = [...document.querySelectorAll('{FOCUSABLE}')]
        .filter((el) => el.tabIndex >= 0 && !el.closest('dialog:not([open])'));
    return all.length ? all[0].outerHTML.slice(0, 120) : null;
}}"""


@pytest.fixture
def device(browser: Any, relay_server: RelayServer) -> Iterator[Any]:
    """A logged-in page on a device of DEVICES; any JavaScript or console error fails the test."""
    contexts: list[Any] = []
    errors: list[str] = []

    def open_device(kind: str, username: str = "alice") -> Page:
        width, height, touch = DEVICES[kind]
        context = browser.new_context(base_url=relay_server.url, viewport={"width": width, "height": height},
                                      has_touch=touch, is_mobile=touch)
        context.set_default_timeout(30_000)
        contexts.append(context)
        page: Page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" and not REFUSED.search(m.text)
                else None)
        page.goto("/accounts/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{relay_server.url}/")
        expect(page.locator(".relay.relay-js").first).to_be_attached()
        coarse = page.evaluate("() => matchMedia('(pointer: coarse)').matches")
        assert coarse is touch, f"{kind}: (pointer: coarse) is {coarse}"
        return page

    yield open_device
    for context in contexts:
        context.close()
    assert not errors, f"JavaScript errors: {errors}"


def composer(page: Page) -> Any:
    return page.locator("#composer-input")


def focused_id(page: Page) -> str:
    return str(page.evaluate("() => document.activeElement ? document.activeElement.id : ''"))


def set_metadata(page: Page, metadata: dict[str, str]) -> None:
    if page.locator("#composer details.advanced").get_attribute("open") is None:
        page.click("#composer details.advanced > summary")
    page.fill("#composer-metadata", json.dumps(metadata))


def sent_prompts(page: Page) -> list[str]:
    return [t.strip() for t in page.locator("article.turn .msg-user .bubble").all_inner_texts()]


@pytest.mark.parametrize("kind", DEVICES)
def test_text_typed_right_after_sending_stays_in_the_composer(device: Any, relay_server: RelayServer,
                                                              kind: str) -> None:
    page = device(kind)
    first = submit_first_prompt(page, "Warm up", metadata=FAST)
    expect(composer(page)).to_be_focused()  # the box the prompt was typed in, not the new answer
    wait_completed(page, first)
    set_metadata(page, FAST)
    composer(page).fill("What is a relay?")
    composer(page).focus()
    # Enter sends on a desktop; on a touch screen Enter adds a line, and Ctrl+Enter sends everywhere.
    page.keyboard.press("Enter" if kind == "desktop" else "Control+Enter")
    page.keyboard.type("And how do I resume one?")  # at once, while the prompt is on its way
    expect(page.locator("article.turn")).to_have_count(2)
    second = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    expect(composer(page)).to_have_value("And how do I resume one?")
    expect(composer(page)).to_be_focused()
    assert sent_prompts(page) == ["Warm up", "What is a relay?"]
    wait_completed(page, second)
    expect(page.locator("[data-announce]")).to_have_text("Answer completed")  # said, not focused
    expect(composer(page)).to_be_focused()
    expect(composer(page)).to_have_value("And how do I resume one?")

    # Send by pointer: the button is off while sending, and the focus it had goes back to the box.
    page.locator("#composer button[type=submit]").click()
    page.keyboard.type("Third")
    expect(page.locator("article.turn")).to_have_count(3)
    expect(composer(page)).to_have_value("Third")
    expect(composer(page)).to_be_focused()
    assert sent_prompts(page)[-1] == "And how do I resume one?"
    wait_completed(page, str(page.locator("article.turn").last.get_attribute("data-request-id")))


@pytest.mark.parametrize("kind", DEVICES)
def test_a_skip_link_comes_first_and_the_chat_page_opens_in_the_composer(device: Any, kind: str) -> None:
    page = device(kind, "boss")
    first = submit_first_prompt(page, "Open me", metadata=FAST)
    wait_completed(page, first)
    chat = page.url.split("#")[0]
    page.goto(chat)
    expect(page.locator("[data-skip-link]")).to_have_text("Skip to the message box")
    if kind == "desktop":
        expect(composer(page)).to_be_focused()  # a mouse: a keyboard is likely
    else:
        page.wait_for_function("() => document.querySelector('.relay.relay-js') !== null")
        assert focused_id(page) == "", "a touch screen: no on-screen keyboard popping up"

    pages = {chat: ("Skip to the message box", "composer-input"), "/": ("Skip to the message box", "composer-input"),
             "/search/?q=Open": ("Skip to content", "relay-content"),
             "/analytics/": ("Skip to content", "relay-content")}
    for path, (words, target) in pages.items():
        page.goto(path)
        page.wait_for_function("() => document.querySelector('.relay.relay-js') !== null")
        assert "data-skip-link" in page.evaluate(FIRST_FOCUSABLE), path
        if focused_id(page) == "composer-input":
            continue  # the chat page with a mouse: already there
        page.keyboard.press("Tab")  # the first key press on a page that has just opened
        skip = page.locator("[data-skip-link]")
        expect(skip).to_be_focused()
        expect(skip).to_have_text(words)
        box = skip.bounding_box()
        assert box and box["width"] > 40 and box["height"] > 20 and box["y"] >= 0, f"seen when focused: {box}"
        page.keyboard.press("Enter")  # two key presses from the top of any page
        assert focused_id(page) == target, path
    page.goto("/")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.keyboard.type("Straight in")
    expect(composer(page)).to_have_value("Straight in")


@pytest.mark.parametrize("kind", DEVICES)
def test_enter_sends_on_a_desktop_and_adds_a_line_on_a_touch_screen(device: Any, kind: str) -> None:
    page = device(kind)
    first = submit_first_prompt(page, "Warm up", metadata=FAST)
    wait_completed(page, first)
    set_metadata(page, FAST)
    hint = page.locator("#composer [data-hint]")
    expect(hint).to_be_visible()
    assert "composer-hint" in str(composer(page).get_attribute("aria-describedby"))
    composer(page).focus()
    if kind == "desktop":
        expect(hint).to_have_text("Enter sends · Shift+Enter adds a line")
        page.keyboard.type("Line one")
        page.keyboard.press("Shift+Enter")
        page.keyboard.type("line two")
        expect(composer(page)).to_have_value("Line one\nline two")
        page.keyboard.press("Enter")
    else:
        expect(hint).to_have_text("Enter adds a line · Send sends")
        page.keyboard.type("Line one")
        page.keyboard.press("Enter")
        page.keyboard.type("line two")
        expect(composer(page)).to_have_value("Line one\nline two")
        expect(page.locator("article.turn")).to_have_count(1)  # Enter sent nothing
        page.locator("#composer button[type=submit]").tap()
    expect(page.locator("article.turn")).to_have_count(2)
    second = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    expect(turn(page, second).locator(".msg-user .bubble")).to_contain_text("Line one")
    assert "line two" in turn(page, second).locator(".msg-user .bubble").inner_text()
    wait_completed(page, second)
    page.keyboard.type("Sent by Ctrl+Enter")
    page.keyboard.press("Control+Enter")  # on every screen
    expect(page.locator("article.turn")).to_have_count(3)
    expect(composer(page)).to_have_value("")
    wait_completed(page, str(page.locator("article.turn").last.get_attribute("data-request-id")))


@pytest.mark.parametrize("kind", DEVICES)
def test_the_count_shows_near_the_limit_and_send_is_off_over_it_saying_why(device: Any, relay_server: RelayServer,
                                                                           kind: str) -> None:
    page = device(kind)
    first = submit_first_prompt(page, "Warm up", metadata=FAST)
    wait_completed(page, first)
    count = page.locator("#composer [data-count]")
    send = page.locator("#composer button[type=submit]")
    composer(page).fill("A short prompt")
    expect(count).to_have_text("")  # nothing to count yet
    near = int(MAX_INPUT_CHARS * 0.95)
    composer(page).fill("x" * near)
    expect(count).to_have_text(f"{near:,} / {MAX_INPUT_CHARS:,}")
    expect(send).to_be_enabled()
    composer(page).fill("x" * (MAX_INPUT_CHARS + 5))
    expect(count).to_have_text(f"{MAX_INPUT_CHARS + 5:,} / {MAX_INPUT_CHARS:,} · too long")
    expect(send).to_be_disabled()
    expect(send).to_have_attribute("aria-describedby", "composer-limit")
    expect(page.locator("#composer-limit")).to_have_text(
        f"Too long to send: {MAX_INPUT_CHARS + 5:,} characters, at most {MAX_INPUT_CHARS:,}. Remove 5 to send.")
    assert "composer-count" in str(composer(page).get_attribute("aria-describedby"))
    requests = relay_server.query("SELECT COUNT(*) FROM responses_app_responserequest")[0][0]
    composer(page).focus()
    page.keyboard.press("Control+Enter")
    if kind == "desktop":
        page.keyboard.press("Enter")
    page.wait_for_timeout(300)  # a refusal has no event to wait for: give a wrong send its chance
    expect(page.locator("article.turn")).to_have_count(1)
    assert relay_server.query("SELECT COUNT(*) FROM responses_app_responserequest")[0][0] == requests
    assert len(composer(page).input_value()) == MAX_INPUT_CHARS + 5, "nothing is cut"
    page.keyboard.press("Backspace")
    page.keyboard.press("Backspace")
    expect(send).to_be_disabled()
    composer(page).fill("y" * MAX_INPUT_CHARS)  # the limit itself is allowed
    expect(send).to_be_enabled()
    expect(page.locator("#composer-limit")).to_have_text("")


@pytest.mark.parametrize("kind", DEVICES)
def test_errors_are_words_tied_to_their_field_and_go_as_the_person_types(device: Any, kind: str) -> None:
    page = device(kind)
    first = submit_first_prompt(page, "Warm up", metadata=FAST)
    wait_completed(page, first)
    errors = page.locator("#composer-errors")
    box = composer(page)
    box.fill("   ")
    page.locator("#composer button[type=submit]").click()
    expect(errors).to_be_visible()
    expect(errors).to_have_text("Write a message first.")
    expect(errors).to_have_attribute("role", "alert")
    expect(box).to_have_attribute("aria-invalid", "true")
    assert str(box.get_attribute("aria-describedby")).split()[0] == "composer-errors"
    expect(box).to_be_focused()
    page.keyboard.type("H")
    expect(errors).to_be_hidden()
    expect(box).not_to_have_attribute("aria-invalid", "true")
    assert "composer-errors" not in str(box.get_attribute("aria-describedby"))

    # The server's refusal (through the JSON API), worded the same way and tied to its field.
    metadata = page.locator("#composer-metadata")
    page.click("#composer details.advanced > summary")
    metadata.fill("{not json")
    box.fill("Hello there")
    page.locator("#composer button[type=submit]").click()
    expect(errors).to_have_text("The metadata (under Advanced) is not valid JSON.")
    assert "metadata:" not in errors.inner_text() and "input:" not in errors.inner_text()
    expect(metadata).to_have_attribute("aria-invalid", "true")
    expect(metadata).to_have_attribute("aria-describedby", "composer-errors")
    expect(box).to_have_value("Hello there")  # kept, to send again
    expect(box).not_to_have_attribute("aria-invalid", "true")
    box.focus()
    page.keyboard.type("!")  # typing elsewhere leaves the metadata's error in place
    expect(errors).to_be_visible()
    metadata.fill("")
    metadata.press_sequentially(json.dumps(FAST)[:1])
    expect(errors).to_be_hidden()
    expect(metadata).not_to_have_attribute("aria-invalid", "true")


SEND_PLACE = """() => {
    const form = document.getElementById("composer").getBoundingClientRect();
    const send = document.querySelector("#composer button[type=submit]").getBoundingClientRect();
    const stop = document.querySelector("#composer [data-stop-latest]").getBoundingClientRect();
    return {right: Math.round(form.right - send.right), bottom: Math.round(form.bottom - send.bottom),
            width: Math.round(send.width), viewportRight: Math.round(innerWidth - send.right),
            stop: stop.width ? {gap: Math.round(send.left - stop.right), middle: Math.round(
                (stop.top + stop.bottom) / 2 - (send.top + send.bottom) / 2)} : null};
}"""


@pytest.mark.parametrize("kind", DEVICES)
def test_send_keeps_one_place_in_every_state_and_stop_shares_it(device: Any, kind: str) -> None:
    page = device(kind)
    first = submit_first_prompt(page, "Warm up", metadata=FAST)
    wait_completed(page, first)
    expect(page.locator("#composer details.advanced")).not_to_have_attribute("open", "")
    places = {"resting": page.evaluate(SEND_PLACE)}
    composer(page).fill("   ")
    page.locator("#composer button[type=submit]").click()
    expect(page.locator("#composer-errors")).to_be_visible()
    places["an error"] = page.evaluate(SEND_PLACE)
    composer(page).fill("x" * int(MAX_INPUT_CHARS * 0.95))
    expect(page.locator("#composer [data-count]")).not_to_have_text("")
    places["counting"] = page.evaluate(SEND_PLACE)
    composer(page).fill("x" * (MAX_INPUT_CHARS + 1))
    places["over the limit"] = page.evaluate(SEND_PLACE)
    composer(page).fill("A long answer")
    page.click("#composer details.advanced > summary")
    places["Advanced open"] = page.evaluate(SEND_PLACE)
    set_metadata(page, {"sim.tokens_per_s": "40", "sim.tokens": "2000"})
    page.select_option("#composer select[name=model]", "sim-long")
    page.locator("#composer button[type=submit]").click()
    expect(page.locator("article.turn")).to_have_count(2)
    streaming = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    wait_for_text(page, streaming, 20)
    stop = page.locator("#composer [data-stop-latest]")
    expect(stop).to_be_visible()
    places["streaming"] = page.evaluate(SEND_PLACE)
    page.click("#composer details.advanced > summary")
    places["streaming, Advanced folded"] = page.evaluate(SEND_PLACE)
    where = {(p["right"], p["bottom"], p["width"], p["viewportRight"]) for p in places.values()}
    assert len(where) == 1, f"Send moved: {places}"
    beside = places["streaming"]["stop"]
    assert beside and 0 <= beside["gap"] <= 12 and abs(beside["middle"]) <= 2, f"Stop is not beside Send: {places}"
    stop.click()
    expect(turn(page, streaming).locator("[data-badge]")).to_have_attribute("data-badge", "cancelled")
    expect(stop).to_be_hidden()


@pytest.mark.parametrize("kind", DEVICES)
def test_shortcuts_and_their_help(device: Any, relay_server: RelayServer, kind: str) -> None:
    page = device(kind)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    first = submit_first_prompt(page, "Copy me", metadata=FAST)
    wait_completed(page, first)
    help_ = page.locator("#relay-shortcuts")
    box = composer(page)

    # ? types a question mark in a text field; Ctrl+/ opens the help from anywhere.
    box.focus()
    page.keyboard.type("Why?")
    expect(box).to_have_value("Why?")
    expect(help_).not_to_be_visible()
    page.keyboard.press("Control+/")
    expect(help_).to_be_visible()
    expect(help_.locator("[data-close-shortcuts]")).to_be_focused()
    assert_accessible(page)
    assert_accessible(page, "#relay-shortcuts")
    for _ in range(8):  # the focus stays in the help
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.getElementById('relay-shortcuts').contains(document.activeElement)")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("() => document.getElementById('relay-shortcuts').contains(document.activeElement)")
    page.keyboard.press("Escape")
    expect(help_).not_to_be_visible()
    expect(box).to_be_focused()  # restored
    expect(box).to_have_value("Why?")

    # ? outside a text field opens it; the help has a switch for ?, and Close gives the focus back.
    heading = page.locator("h1[data-title]")
    heading.evaluate("h => { h.tabIndex = -1; h.focus(); }")
    page.keyboard.press("?")
    expect(help_).to_be_visible()
    toggle = help_.locator("[data-question-mark]")
    toggle.uncheck()
    help_.locator("[data-close-shortcuts]").click()
    expect(help_).not_to_be_visible()
    expect(heading).to_be_focused()
    page.keyboard.press("?")
    expect(help_).not_to_be_visible()
    page.keyboard.press("Control+/")
    expect(help_).to_be_visible()
    toggle.check()
    page.keyboard.press("Escape")

    # Alt+Shift+letter works from a text field too; never a single letter there.
    page.keyboard.press("Alt+Shift+M")
    expect(box).to_be_focused()
    box.fill("")
    page.keyboard.press("Alt+Shift+C")
    copy = turn(page, first).locator("button[data-copy=answer]")
    expect(copy).to_have_attribute("data-copied", "ok")
    assert page.evaluate("() => navigator.clipboard.readText()") == relay_server.request_row(first)["final_text"]
    expect(box).to_have_value("")

    set_metadata(page, {"sim.tokens_per_s": "40", "sim.tokens": "2000"})
    page.select_option("#composer select[name=model]", "sim-long")
    box.fill("Go on for a while")
    box.press("Control+Enter")
    expect(page.locator("article.turn")).to_have_count(2)
    running = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    wait_for_text(page, running, 20)
    box.focus()
    page.keyboard.type("snc")  # letters typed in the box are letters
    expect(box).to_have_value("snc")
    page.keyboard.press("Alt+Shift+S")
    expect(turn(page, running).locator("[data-badge]")).to_have_attribute("data-badge", "cancelled")
    wait_until(lambda: relay_server.request_row(running)["status"] == "cancelled", 20, "the cancel stored")
    expect(box).to_have_value("snc")

    page.keyboard.press("Alt+Shift+N")
    page.wait_for_url(re.compile(r"/$"))
    expect(box).to_be_focused()  # the new chat's message box, on any screen
    expect(box).to_have_value("")

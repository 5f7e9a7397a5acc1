"""Dark mode, in Chromium: every page of the app passes axe-core (nothing serious or critical, so
every text's contrast is AA) in four modes: the system light, the system dark (Playwright's
emulated prefers-color-scheme), and the header's Theme select against the system both ways; the
app's admin pages and the safety states too. The choice is remembered over a reload and in other
tabs, it is on the app's root before the first frame that draws any of the app's content (no light
flash), "System" forgets it, and without JavaScript the page follows the system with no select
shown. Screenshots of the dark chat page at desktop and phone go to docs/ with RELAY_SCREENSHOT=1."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .axe import assert_accessible
from .conftest import ROOT, RelayServer, Session, open_sessions, serve
from .test_admin_pages import auditor
from .test_chat import submit_first_prompt, turn, wait_completed, wait_for_text
from .test_chat_page import FAST, no_console_errors, send_reply, sized
from .test_chat_tools import make_link
from .test_safety_page import PROMPT, RULE, SLOW, ended_incomplete

pytestmark = pytest.mark.browser

# mode -> (the system's colour scheme, the reader's choice in the Theme select, the theme seen)
MODES = {
    "system-light": ("light", "system", "light"),
    "system-dark": ("dark", "system", "dark"),
    "chosen-dark": ("light", "dark", "dark"),
    "chosen-light": ("dark", "light", "light"),
}
ROOT_BG = {"light": "rgb(247, 247, 248)", "dark": "rgb(13, 17, 23)"}  # theme.css's --bg
STREAM = {"sim.tokens_per_s": "25", "sim.tokens": "2000", "sim.seed": "4"}


def theme_of(page: Page) -> str:
    """The theme the page shows, read from the root's computed background (not the attribute)."""
    page.wait_for_function("() => document.querySelector('.relay.relay-js') !== null")
    background = page.evaluate("() => getComputedStyle(document.querySelector('.relay')).backgroundColor")
    return {colour: name for name, colour in ROOT_BG.items()}[background]


def choose(page: Page, scheme: str, choice: str) -> None:
    """The system's scheme, then the reader's choice in the header's select (on the current page)."""
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    page.get_by_label("Theme", exact=True).select_option(choice)
    expect(page.locator(".relay").first).to_have_attribute("data-theme", choice)


def check(page: Page, path: str, mode: str, theme: str) -> None:
    page.goto(path)
    assert theme_of(page) == theme, f"{path} is not {theme} in {mode}"
    assert_accessible_in(page, f"{mode}, {path}")


def show_form_error(page: Page) -> None:
    """The composer's error box, as a refused send shows it (metadata that is not JSON)."""
    advanced = page.locator("#composer details.advanced")
    if advanced.get_attribute("open") is None:
        page.click("#composer details.advanced > summary")
    page.fill("#composer textarea[name=metadata]", "not json")
    page.fill("#composer textarea[name=input]", "This is refused")
    page.click("#composer button[type=submit]")
    expect(page.locator("#composer .form-errors")).to_be_visible()
    errors = page.console_errors  # type: ignore[attr-defined]
    refused = [e for e in errors if "status of 400" in e]
    assert len(refused) == 1, errors  # the refusal itself, which the browser logs; nothing else
    errors.remove(refused[0])


def assert_accessible_in(page: Page, mode: str) -> None:
    try:
        assert_accessible(page)
    except AssertionError as failure:
        raise AssertionError(f"in {mode}: {failure}") from None


@dataclass
class Gallery:
    """A staff member's conversation holding what the pages can show, made once for the modes."""

    session: Session
    chat: str  # its address
    shared: str  # a read-only link to it


@pytest.fixture(scope="module")
def gallery(browser: Any, relay_server: RelayServer) -> Iterator[Gallery]:
    session = Session(browser, relay_server, "boss")  # staff: analytics too
    page = sized(session, 1280, 900)
    first = submit_first_prompt(page, "How do rivers form?", model="sim-citations", metadata=FAST)
    wait_completed(page, first)
    turn(page, first).get_by_role("button", name="Regenerate").click()  # the version switcher
    expect(page.locator("[data-version-count]")).to_have_text("2/2")
    for model in ("sim-reasoning", "sim-code-interpreter", "sim-refusal"):
        wait_completed(page, send_reply(page, f"Try {model}", model=model, metadata=FAST))
    for model, badge, fault in (("sim-failed", "failed", {}), ("sim-text", "error", {"sim.http_error": "400"}),
                                ("sim-incomplete", "incomplete", {})):
        ended = send_reply(page, f"Try {model}", model=model, metadata={**FAST, **fault})
        expect(turn(page, ended).locator("[data-badge]")).to_have_attribute("data-badge", badge, timeout=60_000)
    cancelled = send_reply(page, "Stop me", model="sim-long", metadata=STREAM)
    wait_for_text(page, cancelled, 20)
    turn(page, cancelled).locator("button.stop").click()
    expect(turn(page, cancelled).locator("[data-badge]")).to_have_attribute("data-badge", "cancelled")
    asking = send_reply(page, "Roll the dice", model="sim-mcp-approval", metadata=FAST)  # Approve / Deny
    expect(turn(page, asking).locator(".approval .approve")).to_be_visible(timeout=20_000)
    shared = make_link(page)
    chat = page.url.split("?")[0].split("#")[0]
    no_console_errors(page)
    page.close()
    yield Gallery(session, chat, shared)
    errors = session.errors
    session.close()
    assert not errors, f"JavaScript errors: {errors}"


@pytest.mark.parametrize("mode", MODES)
def test_every_page_passes_axe(gallery: Gallery, mode: str) -> None:
    scheme, choice, theme = MODES[mode]
    page = sized(gallery.session, 1280, 900)
    page.goto(gallery.chat)
    choose(page, scheme, choice)
    assert theme_of(page) == theme
    page.goto(gallery.chat + "?tools=open")  # the share panel open, with its link
    assert theme_of(page) == theme
    for summary in page.locator("details.block-tool > summary, details.block-reasoning > summary").all():
        summary.click()  # code, tool output, the thought
    show_form_error(page)
    assert_accessible_in(page, mode)
    streaming = send_reply(page, f"Stream in {mode}", model="sim-long", metadata=STREAM)
    wait_for_text(page, streaming, 300)
    page.mouse.move(640, 300)
    page.mouse.wheel(0, -1500)
    expect(page.get_by_role("button", name=re.compile("Jump to latest"))).to_be_visible()
    assert_accessible_in(page, mode)  # an answer streaming, with the pill
    turn(page, streaming).locator("button.stop").click()
    expect(turn(page, streaming).locator("[data-badge]")).to_have_attribute("data-badge", "cancelled")
    for path in ("/", "/search/?q=rivers", "/analytics/", gallery.shared):
        check(page, path, mode, theme)
        if path.startswith("/search/"):
            expect(page.locator(".search-hit mark").first).to_be_visible()  # a hit, highlighted
    no_console_errors(page)
    page.close()


FIRST_FRAMES = """(() => {
    // Every animation frame until the page has loaded: for each app root whose content has been
    // parsed (anything beside the assets theme.js sits among), the theme it had in that frame.
    window.relayFrames = [];
    const look = () => {
        for (const root of document.querySelectorAll(".relay")) {
            if (root.querySelector(":scope > :not(script, link)")) window.relayFrames.push(root.dataset.theme || "");
        }
        if (document.readyState !== "complete") requestAnimationFrame(look);
    };
    requestAnimationFrame(look);
})();"""


def test_the_choice_is_remembered_and_on_the_root_before_the_first_paint(sessions: Any) -> None:
    alice = sessions("alice")
    page = sized(alice, 1280)
    page.emulate_media(color_scheme="light")
    first = submit_first_prompt(page, "Remember my theme", metadata=FAST)
    wait_completed(page, first)
    chat = page.url
    assert theme_of(page) == "light"
    choose(page, "light", "dark")
    assert theme_of(page) == "dark"
    assert page.evaluate("() => localStorage.getItem('relay-theme')") == "dark"

    other = sized(alice, 390)  # another tab of the same browser
    other.emulate_media(color_scheme="light")
    other.add_init_script(FIRST_FRAMES)
    other.goto(chat)
    assert theme_of(other) == "dark"
    expect(other.get_by_label("Theme", exact=True)).to_have_value("dark")
    other.wait_for_function("() => document.readyState === 'complete'")
    frames = other.evaluate("() => window.relayFrames")
    assert frames and set(frames) == {"dark"}, f"a frame drew the app without its theme: {frames}"
    for path in ("/", "/search/?q=theme", "/accounts/login/"):  # every page with the app's assets
        other.goto(path)
        expect(other.locator(".relay").first).to_have_attribute("data-theme", "dark")

    page.reload()
    assert theme_of(page) == "dark"
    expect(page.get_by_label("Theme", exact=True)).to_have_value("dark")
    page.get_by_label("Theme", exact=True).select_option("system")
    assert theme_of(page) == "light"
    assert page.evaluate("() => localStorage.getItem('relay-theme')") is None
    page.emulate_media(color_scheme="dark")
    assert theme_of(page) == "dark", "System follows the system as it changes"
    no_console_errors(page)
    no_console_errors(other)


def test_without_javascript_the_page_follows_the_system(browser: Any, relay_server: RelayServer) -> None:
    context = browser.new_context(base_url=relay_server.url, java_script_enabled=False, color_scheme="dark")
    try:
        page = context.new_page()
        page.goto("/accounts/login/")
        root = page.locator(".relay").first
        assert root.get_attribute("data-theme") is None
        background = root.evaluate("el => getComputedStyle(el).backgroundColor")
        assert background == ROOT_BG["dark"]
        page.fill("input[name=username]", "bob")
        page.fill("input[name=password]", "pw")
        page.click("button[type=submit]")
        page.wait_for_url(f"{relay_server.url}/")
        expect(page.locator(".theme-choice")).to_be_hidden()  # a select that could not work is not shown
        assert page.locator(".relay").first.evaluate("el => getComputedStyle(el).backgroundColor") == ROOT_BG["dark"]
        page.emulate_media(color_scheme="light")
        assert page.locator(".relay").first.evaluate("el => getComputedStyle(el).backgroundColor") == ROOT_BG["light"]
    finally:
        context.close()


def test_the_page_keeps_a_strict_content_security_policy(sessions: Any) -> None:
    page = sized(sessions("bob"), 1280)
    response = page.goto("/")
    assert response is not None
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    inline = page.evaluate("() => Array.from(document.scripts).filter(s => !s.src && s.type !== 'application/json')"
                           ".length")
    assert inline == 0
    expect(page.locator(".relay").first).to_have_attribute("data-theme", "system")
    no_console_errors(page)


def test_the_admin_pages_of_the_app_pass_axe_in_both_themes(sessions: Any, relay_server: RelayServer) -> None:
    """The request's change page and its event log (they load admin.css, which has no colour: the
    admin's own light and dark apply) in the system's light and dark."""
    page = sized(sessions("alice"), 1280)
    asked = submit_first_prompt(page, "Audit me", metadata=FAST)
    wait_completed(page, asked)
    admin = sized(sessions(auditor(relay_server)), 1280)
    for scheme in ("light", "dark"):
        admin.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
        for path in (f"/admin/responses_app/responserequest/{asked}/change/",
                     f"/admin/responses_app/responserequest/{asked}/events/"):
            admin.goto(path)
            assert_accessible_in(admin, f"{scheme}, {path}")


@pytest.fixture(scope="module")
def safety_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayServer]:
    with serve(tmp_path_factory.mktemp("dark-safety-server"), RELAY_SAFETY_MODE="off",
               RELAY_SAFETY_MODES="sim-text=buffered,sim-reasoning=progressive", RELAY_SAFETY_RULES=RULE,
               RELAY_SAFETY_PRECHECK="true") as server:
        yield server


@pytest.fixture
def safety_users(browser: Any, safety_server: RelayServer) -> Iterator[Any]:
    yield from open_sessions(browser, safety_server)


def test_the_safety_states_pass_axe_in_every_mode(safety_users: Any, safety_server: RelayServer) -> None:
    page = sized(safety_users("alice"), 1280, 900)
    withheld = submit_first_prompt(page, PROMPT, metadata=SLOW)
    ended_incomplete(page, withheld, safety_server, "withheld")
    retracted = send_reply(page, PROMPT, model="sim-reasoning", metadata=SLOW)
    ended_incomplete(page, retracted, safety_server, "retracted")
    refused = send_reply(page, "They asked: “is a kumquat edible?”", metadata=FAST)
    expect(turn(page, refused).locator("[data-error]")).to_contain_text("Not sent", timeout=30_000)
    for scheme, choice, theme in MODES.values():
        choose(page, scheme, choice)
        page.reload()
        assert theme_of(page) == theme
        assert_accessible_in(page, f"{scheme} system, {choice} chosen")
    no_console_errors(page)


def test_screenshots_of_the_dark_chat_page(sessions: Any, relay_server: RelayServer) -> None:
    """docs/screenshot-dark-desktop.png and docs/screenshot-dark-phone.png with RELAY_SCREENSHOT=1
    (otherwise into the server's temp dir): web search, reasoning, a tool, one answer streaming."""
    alice = sessions("alice")
    page = sized(alice, 1280, 900)
    page.emulate_media(color_scheme="dark")
    first = submit_first_prompt(page, "How do rivers form?", model="sim-citations",
                                metadata={"sim.tokens_per_s": "0", "sim.seed": "3"})
    wait_completed(page, first)
    at_once = {"sim.tokens_per_s": "0"}
    wait_completed(page, send_reply(page, "Think it through", model="sim-reasoning", metadata=at_once))
    tool = send_reply(page, "Compute it", model="sim-code-interpreter", metadata=at_once)
    wait_completed(page, tool)
    turn(page, tool).locator("details.block-tool > summary").first.click()
    streaming = send_reply(page, "And lakes?", model="sim-text", metadata={"sim.tokens_per_s": "20",
                                                                           "sim.tokens": "400"})
    page.click("#composer details.advanced > summary")  # fold Advanced again
    wait_for_text(page, streaming, 200)
    assert theme_of(page) == "dark"
    folder = ROOT / "docs" if os.environ.get("RELAY_SCREENSHOT") == "1" else relay_server.db_path.parent
    page.screenshot(path=str(folder / "screenshot-dark-desktop.png"))
    phone = sized(alice, 390, 844)
    phone.emulate_media(color_scheme="dark")
    phone.goto(page.url)
    wait_for_text(phone, streaming, 250)
    assert theme_of(phone) == "dark"
    phone.screenshot(path=str(folder / "screenshot-dark-phone.png"))
    for name in ("screenshot-dark-desktop.png", "screenshot-dark-phone.png"):
        assert (folder / name).stat().st_size > 10_000
    no_console_errors(page)

"""The pages around the chat in Chromium, where a person sees them: a send refused because four
answers are running opens at the composer with the reason in words (focused, in view, the text
kept); a search result in an older version is shown for that page view only; a new share link
lands in view under the site's sticky header and copies (the clipboard API, and without it);
a link for signed-in people tells a logged-out visitor why to log in, a revoked one says so;
staff-only analytics refuse in a page. The database and the server's log are the oracles."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .axe import assert_accessible
from .conftest import RelayServer, open_sessions, serve
from .test_chat import submit_first_prompt, turn, wait_completed
from .test_chat_page import FAST, WIDTHS, no_console_errors, send_reply, sized

pytestmark = pytest.mark.browser

RUNNING = {"sim.tokens": "4000", "sim.tokens_per_s": "5", "sim.seed": "3"}  # minutes: running while we look
HEADER_PX = 48  # the demo's sticky, see-through top bar (project/static/project/site.css)

IN_VIEW = """el => {
    const r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, height: innerHeight, scrollY};
}"""


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayServer]:
    """A server of its own with the default of four answers running per user."""
    with serve(tmp_path_factory.mktemp("relay-edges"), RELAY_MAX_CONCURRENT_PER_USER="4") as server:
        yield server


@pytest.fixture
def people(browser: Any, limited_server: RelayServer) -> Iterator[Any]:
    yield from open_sessions(browser, limited_server)


def in_view_below_header(page: Page, selector: str) -> dict[str, float]:
    box: dict[str, float] = page.locator(selector).evaluate(IN_VIEW)
    assert box["top"] >= HEADER_PX and box["bottom"] <= box["height"], box
    return box


# --- a refused send -------------------------------------------------------------------------------

def test_a_fifth_send_from_the_list_opens_at_the_reason_in_words(people: Any, limited_server: RelayServer) -> None:
    page = sized(people("alice"), 390, 420)  # four conversations push the composer out of this window
    running = [submit_first_prompt(page, f"Running {n}", model="sim-long", metadata=RUNNING) for n in range(4)]
    statuses = {r: limited_server.request_row(r)["status"] for r in running}
    assert set(statuses.values()) <= {"pending", "streaming"}, statuses

    page.goto("/")
    page.fill("#composer textarea[name=input]", "A fifth question, typed with care")
    page.click("#composer button[type=submit]")
    page.wait_for_url("**/c/new/")
    error = page.locator("#composer [data-composer-error]")
    expect(error).to_be_focused()
    expect(error).to_have_attribute("role", "alert")
    expect(error).to_have_text("You have 4 answers running. Wait for one to finish or stop one, then send again.")
    box = in_view_below_header(page, "#composer [data-composer-error]")
    assert box["scrollY"] > 0, "the list is longer than the window: the page scrolled to the composer"
    expect(page.locator("#composer textarea[name=input]")).to_have_value("A fifth question, typed with care")
    assert "RELAY_" not in page.content()
    assert len(limited_server.query("SELECT id FROM responses_app_responserequest")) == 4, "nothing started"
    assert_accessible(page)
    assert [e for e in page.console_errors if "429" not in e] == []  # type: ignore[attr-defined]


# --- a search result in an older version ----------------------------------------------------------

def test_an_older_version_from_search_is_shown_for_that_page_view_only(people: Any,
                                                                       limited_server: RelayServer) -> None:
    page = sized(people("bob"), 1280)
    word = f"quokka{uuid.uuid4().hex[:6]}"
    first = submit_first_prompt(page, f"Tell me about the {word}", metadata=FAST)
    wait_completed(page, first)
    turn(page, first).get_by_role("button", name="Regenerate").click()
    expect(page.locator("#turns > article.turn [data-version-count]")).to_have_text("2/2")  # a version
    latest = str(page.locator("#turns > article.turn").first.get_attribute("data-request-id"))
    assert latest != first
    wait_completed(page, latest)
    for text in ("And its habitat?", "And its diet?"):
        wait_completed(page, send_reply(page, text, metadata=FAST))
    expect(page.locator("#turns > article.turn")).to_have_count(3)
    conversation = page.url.split("/c/")[1].split("/")[0]

    page.goto("/")
    page.get_by_role("searchbox", name="Search your conversations").fill(word)
    page.get_by_role("searchbox", name="Search your conversations").press("Enter")
    older = page.locator(f'.search-hit[data-request-id="{first}"]')
    expect(older).to_contain_text("in an older version, not the one shown")
    expect(page.locator(f'.search-hit[data-request-id="{latest}"] .hit-version')).to_have_count(0)
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: frames.append(str(frame)))
            if "/ws/conversations/" in ws.url else None)
    older.locator("a").click()
    page.wait_for_url(f"**?version={first}#turn-{first}")
    for _ in range(600):  # the socket tells this page the saved branch on connect: it must not take it
        if any('"turns"' in frame for frame in frames):
            break
        page.wait_for_timeout(50)
    assert any('"turns"' in frame for frame in frames), frames
    page.wait_for_load_state("networkidle")
    assert page.locator("#turns > article.turn").count() == 1
    expect(turn(page, first)).to_be_in_viewport()
    expect(page.locator("[data-version-notice]")).to_contain_text("another version of this conversation")
    expect(page.locator("#composer")).to_have_count(0)
    leaf = limited_server.query("SELECT leaf_id FROM responses_app_conversation WHERE id = ?",
                                conversation.replace("-", ""))[0][0]
    assert leaf.replace("-", "") != first.replace("-", ""), "the saved choice stays"
    assert_accessible(page)

    page.get_by_role("link", name="Back to the version shown").click()
    expect(page.locator("#turns > article.turn")).to_have_count(3)
    no_console_errors(page)


# --- share links ----------------------------------------------------------------------------------

@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_new_share_link_lands_in_view_and_copies(people: Any, width: int) -> None:
    carol = people("boss")
    carol.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = sized(carol, width, 700)
    first = submit_first_prompt(page, "Something worth sharing", metadata=FAST)
    wait_completed(page, first)
    for text in ("More", "And more", "And still more"):  # a page longer than the window
        wait_completed(page, send_reply(page, text, metadata=FAST))
    page.click("#composer details.advanced > summary")  # fold Advanced: the composer as people see it
    page.locator("details.conversation-tools > summary").click()
    page.get_by_role("button", name="Create a read-only link").click()
    page.wait_for_url("**?tools=open&share=*#share-*")
    row = page.locator("[data-new-share]")
    expect(row).to_be_focused()
    in_view_below_header(page, "[data-new-share]")
    url = row.locator(".share-url").input_value()

    row.get_by_role("button", name="Copy link").click()
    expect(row.locator("[data-copy-status]")).to_have_text("Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == url
    assert_accessible(page, ".conversation-tools")

    # Without the clipboard API (a page over plain HTTP from another host): copied the old way.
    page.add_init_script("window.kept = navigator.clipboard;"
                         "Object.defineProperty(Navigator.prototype, 'clipboard', {get: () => undefined})")
    page.evaluate("() => navigator.clipboard.writeText('')")
    page.reload()
    row = page.locator("[data-new-share]")
    expect(row).to_be_focused()
    row.get_by_role("button", name="Copy link").click()
    expect(row.locator("[data-copy-status]")).to_have_text("Copied")
    assert page.evaluate("() => window.kept.readText()") == url
    no_console_errors(page)


def test_a_link_needing_a_login_says_why_and_a_revoked_one_says_it_is_gone(browser: Any, people: Any,
                                                                          limited_server: RelayServer) -> None:
    page = sized(people("boss"), 1280)
    first = submit_first_prompt(page, "For signed-in eyes", metadata=FAST)
    wait_completed(page, first)
    page.locator("details.conversation-tools > summary").click()
    page.get_by_role("button", name="Create a read-only link").click()
    page.wait_for_url("**?tools=open&share=*#share-*")
    link = page.locator("[data-new-share] .share-url").input_value()

    context = browser.new_context(base_url=limited_server.url)
    try:
        visitor = context.new_page()
        visitor.goto(link)
        visitor.wait_for_url(re.compile(r"/accounts/login/\?next=/s/"))
        expect(visitor.locator("[data-login-why]")).to_have_text(
            "This conversation was shared with people who have an account here. Log in to read it.")
        assert_accessible(visitor)

        page.locator("[data-new-share] .revoke-form button").click()
        page.wait_for_url("**?tools=open#conversation-tools")
        response = visitor.goto(link)
        assert response is not None and response.status == 404
        expect(visitor.get_by_role("heading", level=1)).to_have_text("This link was revoked or never existed")
        assert visitor.locator(".relay .card.refused").evaluate("el => getComputedStyle(el).borderRadius") != "0px"
        assert_accessible(visitor)
    finally:
        context.close()


# --- analytics ------------------------------------------------------------------------------------

def test_analytics_refuse_a_non_staff_user_in_a_page_and_log_no_error(people: Any,
                                                                     limited_server: RelayServer) -> None:
    page = sized(people("bob"), 390)
    before = len(limited_server.log_path.read_text(errors="replace"))
    response = page.goto("/analytics/")
    assert response is not None and response.status == 403
    expect(page.get_by_role("heading", level=1)).to_have_text("Analytics are for staff")
    expect(page.locator(".refused")).to_contain_text("You are signed in as bob")
    assert_accessible(page)
    log = limited_server.log_path.read_text(errors="replace")[before:]
    assert "Traceback" not in log and "PermissionDenied" not in log and " ERROR " not in log, log[-2000:]

"""Versions, share links, search and export in Chromium at desktop (1280 px) and phone (390 px)
widths, against the real server: a version picked in one tab shows in the other at once, a share
link followed live by another user (and by nobody signed in, where allowed) and closed the moment
it is revoked, a search that opens the turn, exports downloaded. The database is the oracle."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .axe import assert_accessible
from .conftest import PASSWORD, RelayServer, open_sessions, serve
from .test_chat import submit_first_prompt, turn, wait_completed
from .test_chat_page import FAST, WIDTHS, no_console_errors, send_reply, sized

pytestmark = pytest.mark.browser

SLOW = {"sim.tokens": "900", "sim.tokens_per_s": "40", "sim.seed": "5"}  # about 20 s: live while we look


def count_of(page: Page, request_id: str) -> Any:
    return turn(page, request_id).locator("[data-version-count]")


def shown_ids(page: Page) -> list[str]:
    return list(page.eval_on_selector_all("#turns > article.turn", "ts => ts.map(t => t.dataset.requestId)"))


def no_sideways_scroll(page: Page) -> None:
    assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")


# --- versions, not duplicates -------------------------------------------------------------------------

@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_versions_of_a_turn_are_picked_in_one_tab_and_shown_in_the_other(sessions: Any, relay_server: RelayServer,
                                                                         width: int) -> None:
    alice = sessions("alice")
    page = sized(alice, width)
    first = submit_first_prompt(page, "Versions, first prompt", metadata=FAST)
    wait_completed(page, first)
    second = send_reply(page, "Versions, second prompt", metadata=FAST)
    wait_completed(page, second)
    other = sized(alice, 1280)
    other.goto(page.url.split("#")[0])
    other.wait_for_function("() => document.querySelector('.relay.relay-js') !== null")

    turn(page, first).get_by_role("button", name="Regenerate").click()
    expect(page.locator("#turns > article.turn")).to_have_count(1)  # a version, not a turn at the end
    regenerated = shown_ids(page)[0]
    assert regenerated not in (first, second)
    expect(count_of(page, regenerated)).to_have_text("2/2")
    expect(other.locator("#turns > article.turn")).to_have_count(1)  # the other tab follows at once
    expect(count_of(other, regenerated)).to_have_text("2/2")
    wait_completed(page, regenerated)
    wait_completed(other, regenerated)

    started = time.monotonic()
    turn(other, regenerated).get_by_role("button", name="Previous version").click()
    for tab in (other, page):  # the first version, and the conversation that followed it
        expect(tab.locator("#turns > article.turn")).to_have_count(2)
        assert shown_ids(tab) == [first, second]
        expect(count_of(tab, first)).to_have_text("1/2")
    switched_s = time.monotonic() - started
    expect(turn(other, first).locator("button[data-step=next]")).to_be_focused()  # keep stepping by keyboard
    assert switched_s < 5, f"the other tab showed the version after {switched_s:.1f} s"

    turn(page, first).get_by_role("button", name="Edit").click()
    page.fill(f"#edit-{first}", "Versions, first prompt edited")
    turn(page, first).get_by_role("button", name="Send").click()
    for tab in (page, other):
        expect(tab.locator("#turns > article.turn")).to_have_count(1)
    edited = shown_ids(page)[0]
    expect(count_of(other, edited)).to_have_text("3/3")
    expect(turn(other, edited).locator(".msg-user .bubble")).to_have_text("Versions, first prompt edited")
    wait_completed(page, edited)
    no_sideways_scroll(page)

    conversation = page.url.split("/c/")[1].split("/")[0].replace("-", "")
    rows = relay_server.query("SELECT id, parent_id FROM responses_app_responserequest WHERE conversation_id = ? "
                              "ORDER BY created", conversation)
    assert len(rows) == 4, "one logical request per version and turn"
    assert [parent for _, parent in rows] == [None, first.replace("-", ""), None, None]
    leaf = relay_server.query("SELECT leaf_id FROM responses_app_conversation WHERE id = ?", conversation)[0][0]
    assert leaf == edited.replace("-", "")
    no_console_errors(page)
    no_console_errors(other)


def test_versions_without_javascript(browser: Any, sessions: Any, relay_server: RelayServer) -> None:
    alice = sessions("alice")
    page = sized(alice, 1280)
    first = submit_first_prompt(page, "No script, first", metadata=FAST)
    wait_completed(page, first)
    turn(page, first).get_by_role("button", name="Regenerate").click()
    expect(turn(page, first)).to_have_count(0)  # replaced by its new version
    expect(page.locator("#turns > article.turn")).to_have_count(1)
    regenerated = shown_ids(page)[0]
    wait_completed(page, regenerated)
    chat_url = page.url.split("#")[0]

    context = browser.new_context(base_url=relay_server.url, java_script_enabled=False)
    try:
        plain = context.new_page()
        plain.goto("/accounts/login/")
        plain.fill("input[name=username]", "alice")
        plain.fill("input[name=password]", PASSWORD)
        plain.click("button[type=submit]")
        plain.goto(chat_url)
        expect(count_of(plain, regenerated)).to_have_text("2/2")
        turn(plain, regenerated).get_by_role("button", name="Previous version").click()  # a form: the page reloads
        plain.wait_for_url(f"**#turn-{first}")
        assert shown_ids(plain) == [first]
        expect(count_of(plain, first)).to_have_text("1/2")
    finally:
        context.close()
    expect(count_of(page, first)).to_have_text("1/2")  # and the tab with the script followed


# --- share a live answer --------------------------------------------------------------------------------

def make_link(page: Page, *, anonymous: bool = False) -> str:
    page.locator("details.conversation-tools > summary").click()
    if anonymous:
        page.get_by_label("anyone with the link, no account needed").check()
    page.get_by_role("button", name="Create a read-only link").click()
    page.wait_for_url("**?tools=open&share=*#share-*")
    return str(page.locator(".share-links .share-url").first.input_value())


def follow_sockets(page: Page) -> list[tuple[str, float]]:
    closed: list[tuple[str, float]] = []
    page.on("websocket", lambda ws: ws.on("close", lambda _ws: closed.append((ws.url, time.monotonic()))))
    return closed


def watch_live_then_revoke(owner_page: Page, viewer: Page, request_id: str, link: str) -> float:
    """The viewer opens the link mid-answer and sees it grow; the owner revokes; seconds to the close."""
    closed = follow_sockets(viewer)
    viewer.goto(link)
    expect(turn(viewer, request_id)).to_have_count(1)
    for control in ("#composer", ".stop", ".regenerate-form", ".conversation-tools"):
        expect(viewer.locator(control)).to_have_count(0)
    box = turn(viewer, request_id).locator("[data-blocks]")
    expect(box).not_to_be_empty()
    before = len(box.inner_text())
    viewer.wait_for_function("([id, n]) => document.querySelector(`#turn-${id} [data-blocks]`).innerText.length > n",
                             arg=[request_id, before + 40])  # live: it grows
    assert_accessible(viewer)  # the shared page, with an answer streaming
    revoked_at = time.monotonic()
    owner_page.locator(".share-links .revoke-form button").first.click()
    expect(turn(viewer, request_id).locator("[data-error]")).to_contain_text("cannot watch")
    mine = [at for url, at in closed if "/ws/shares/" in url and "/requests/" in url]
    assert mine, "the link's request socket closed"
    return mine[0] - revoked_at


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_share_link_follows_a_live_answer_and_revoking_closes_it(sessions: Any, relay_server: RelayServer,
                                                                   width: int) -> None:
    alice, bob = sessions("alice"), sessions("bob")
    page = sized(alice, 1280)
    request_id = submit_first_prompt(page, f"Share me {uuid.uuid4().hex[:6]}", model="sim-long", metadata=SLOW)
    link = make_link(page)
    viewer = sized(bob, width)
    seconds = watch_live_then_revoke(page, viewer, request_id, link)
    assert seconds < 1.5, f"the viewer's socket closed {seconds:.2f} s after the revocation"
    no_sideways_scroll(viewer)
    no_console_errors(viewer)
    assert viewer.request.get(link).status == 404, "the link answers 404 from then on"
    wait_completed(page, request_id)  # the owner's answer went on
    row = relay_server.request_row(request_id)
    assert row["status"] == "completed" and row["viewer_connections"] >= 2
    conversation = page.url.split("/c/")[1].split("/")[0].replace("-", "")
    assert relay_server.query("SELECT COUNT(*) FROM responses_app_responserequest WHERE conversation_id = ?",
                              conversation) == [(1,)], "a viewer is never a request"
    assert relay_server.query("SELECT COUNT(*) FROM responses_app_responserequest r JOIN auth_user u "
                              "ON u.id = r.owner_id WHERE u.username = 'bob' AND r.conversation_id = ?",
                              conversation) == [(0,)]


@pytest.fixture(scope="module")
def anonymous_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayServer]:
    with serve(tmp_path_factory.mktemp("relay-anonymous"), RELAY_SHARE_ANONYMOUS="true") as server:
        yield server


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_anyone_with_the_link_where_the_setting_allows_it(browser: Any, anonymous_server: RelayServer,
                                                          width: int) -> None:
    for open_session in open_sessions(browser, anonymous_server):
        page = sized(open_session("alice"), 1280)
        request_id = submit_first_prompt(page, "Share with anyone", model="sim-long", metadata=SLOW)
        link = make_link(page, anonymous=True)
        context = browser.new_context(viewport={"width": width, "height": 800})  # nobody signed in
        try:
            viewer = context.new_page()
            errors: list[str] = []
            viewer.on("pageerror", lambda error, sink=errors: sink.append(str(error)))
            seconds = watch_live_then_revoke(page, viewer, request_id, link)
            assert seconds < 1.5, f"the anonymous viewer's socket closed {seconds:.2f} s after the revocation"
            assert not errors, errors
        finally:
            context.close()


# --- find and take out ----------------------------------------------------------------------------------

@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_search_opens_the_turn_and_exports_download(sessions: Any, width: int) -> None:
    page = sized(sessions("bob"), width)
    word = f"axolotl{uuid.uuid4().hex[:6]}"
    first = submit_first_prompt(page, f"What is an {word}?", metadata=FAST)
    wait_completed(page, first)
    second = send_reply(page, "Something else entirely", metadata=FAST)
    wait_completed(page, second)

    page.goto("/")
    page.get_by_role("searchbox", name="Search your conversations").fill(word)
    page.get_by_role("searchbox", name="Search your conversations").press("Enter")
    hits = page.locator(".search-hit")
    expect(hits).to_have_count(1)
    expect(hits.locator("mark").first).to_have_text(word)
    no_sideways_scroll(page)
    hits.locator("a").click()
    page.wait_for_url(f"**#turn-{first}")
    expect(turn(page, first)).to_be_in_viewport()

    page.locator("details.conversation-tools > summary").click()
    with page.expect_download() as markdown:
        page.locator("a[data-export=md]").click()
    text = open(markdown.value.path(), encoding="utf-8").read()
    assert markdown.value.suggested_filename.endswith(".md")
    assert f"What is an {word}?" in text and "Something else entirely" in text and text.count("## Assistant") == 2
    with page.expect_download() as exported:
        page.locator("a[data-export=json]").click()
    data = json.loads(open(exported.value.path(), encoding="utf-8").read())
    assert [t["id"] for t in data["turns"]] == [first, second]
    assert data["turns"][0]["status"] == "completed" and data["turns"][0]["view"]["blocks"]
    no_console_errors(page)


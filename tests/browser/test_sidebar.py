"""The conversation sidebar, Pin and Archive, and Delete's own confirm with Undo, in
Chromium at desktop (1280 px) and phone (390 px) widths: the sidebar beside the conversation or a
drawer (focus in, Escape and a pick close it, focus back), the filter as one types, the live mark
while an answer is written, axe-core clean in the light and dark themes."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .axe import assert_accessible
from .conftest import RelayServer
from .test_chat import submit_first_prompt, wait_completed, wait_for_text
from .test_chat_page import FAST, WIDTHS, no_console_errors, sized

pytestmark = pytest.mark.browser

SLOW = {"sim.tokens_per_s": "40", "sim.tokens": "600", "sim.seed": "3"}


def conversation_id(page: Page) -> str:
    match = re.search(r"/c/([0-9a-f-]+)/", page.url)
    assert match, page.url
    return match.group(1)


def item(page: Page, conversation: str) -> Any:
    return page.locator(f'[data-sidebar-item][data-conversation="{conversation}"]')


def sidebar_titles(page: Page) -> list[str]:
    return [t.strip() for t in page.locator("[data-sidebar-item]:visible [data-sidebar-title]").all_inner_texts()]


def ready(page: Page) -> None:
    page.wait_for_function("() => document.querySelector('.relay.relay-js') !== null")


def open_drawer(page: Page) -> None:
    toggle = page.locator("[data-sidebar-toggle]")
    toggle.click()
    expect(page.locator("[data-sidebar]")).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")


def axe_in_both_themes(page: Page) -> None:
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
        assert_accessible(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_sidebar_lists_filters_and_marks_the_live_conversation(sessions: Any, relay_server: RelayServer,
                                                                    width: int) -> None:
    alice = sessions("alice")
    page = sized(alice, width)
    wait_completed(page, submit_first_prompt(page, f"Rivers of Europe {width}", metadata=FAST))
    rivers = conversation_id(page)
    streaming = submit_first_prompt(page, f"Baking bread at home {width}", model="sim-long", metadata=SLOW)
    bread = conversation_id(page)
    ready(page)
    bar = page.locator("[data-sidebar]")
    toggle = page.locator("[data-sidebar-toggle]")
    if width < 900:  # a phone: a drawer behind the Conversations button
        expect(bar).to_be_hidden()
        expect(toggle).to_be_visible()
        open_drawer(page)
        expect(page.locator("[data-sidebar-new]")).to_be_focused()  # the focus moved in
        assert page.evaluate("() => document.querySelector('.chat').inert") is True  # the page behind is out of reach
    else:  # beside the conversation, which keeps its room
        expect(bar).to_be_visible()
        expect(toggle).to_be_hidden()
        side = bar.bounding_box()
        turns = page.locator("#turns").bounding_box()
        assert side and turns and side["x"] + side["width"] <= turns["x"], (side, turns)
    assert page.evaluate("() => document.scrollingElement.scrollWidth <= innerWidth"), "no horizontal scroll"
    expect(bar.locator("a").first).to_have_text("New chat")  # New chat first
    expect(item(page, bread).locator("a")).to_have_attribute("aria-current", "page")
    expect(item(page, rivers).locator("a")).not_to_have_attribute("aria-current", "page")
    wait_for_text(page, streaming, 20)
    expect(item(page, bread).locator("[data-live-marker]")).to_be_visible()  # an answer is being written
    expect(item(page, rivers).locator("[data-live-marker]")).to_have_count(0)
    axe_in_both_themes(page)

    filter_box = page.get_by_label("Filter your conversations by title")
    filter_box.press_sequentially(f"RIVERS OF EUROPE {width}")  # as one types, whatever the case
    assert sidebar_titles(page) == [f"Rivers of Europe {width}"]
    filter_box.fill("zzz")
    expect(page.locator("[data-sidebar-none]")).to_be_visible()
    expect(page.locator("[data-sidebar-search]")).to_have_attribute("href", "/search/?q=zzz")
    filter_box.fill("")
    assert sidebar_titles(page)[:2] == [f"Baking bread at home {width}", f"Rivers of Europe {width}"]

    other = sized(alice, width)  # another tab: the server marks the other conversation live
    other.goto(f"/c/{rivers}/")
    ready(other)
    expect(item(other, bread)).to_have_attribute("data-live", "")
    wait_completed(page, streaming)
    expect(item(page, bread).locator("[data-live-marker]")).to_have_count(0)  # ended here: unmarked at once
    expect(item(other, bread).locator("[data-live-marker]")).to_have_count(0, timeout=25_000)  # and there, soon

    if width < 900:
        page.keyboard.press("Escape")
        expect(bar).to_be_hidden()
        expect(toggle).to_be_focused()  # the focus is back on the button
        expect(toggle).to_have_attribute("aria-expanded", "false")
        assert page.evaluate("() => document.querySelector('.chat').inert") is False
        open_drawer(page)
    item(page, rivers).locator("a").click()  # a pick goes there (and closes the drawer)
    page.wait_for_url(f"{relay_server.url}/c/{rivers}/")
    expect(item(page, rivers).locator("a")).to_have_attribute("aria-current", "page")
    no_console_errors(page)
    no_console_errors(other)


def test_new_chat_in_the_sidebar_and_the_shortcut_reach_the_message_box(sessions: Any) -> None:
    page = sized(sessions("bob"), 1280)
    wait_completed(page, submit_first_prompt(page, "Hello there", metadata=FAST))
    ready(page)
    page.locator("[data-sidebar-new]").click()
    page.wait_for_url(re.compile(r"/$"))
    expect(page.locator("#composer-input")).to_be_focused()
    page.go_back()
    ready(page)
    page.keyboard.press("Alt+Shift+KeyN")
    page.wait_for_url(re.compile(r"/$"))
    expect(page.locator("#composer-input")).to_be_focused()


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_delete_asks_in_the_page_and_undo_brings_it_back(sessions: Any, relay_server: RelayServer,
                                                        width: int) -> None:
    page = sized(sessions("bob"), width)
    wait_completed(page, submit_first_prompt(page, "Keep me after all", metadata=FAST))
    chat = conversation_id(page)
    ready(page)
    page.on("dialog", lambda dialog: pytest.fail(f"a browser dialog: {dialog.message}"))
    delete = page.locator(".conversation-actions").get_by_role("button", name="Delete")
    delete.click()
    dialog = page.locator("dialog[data-delete-dialog]")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()  # the safe answer first
    axe_in_both_themes(page)
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(delete).to_be_focused()
    assert relay_server.query("SELECT deleted_at FROM responses_app_conversation WHERE id = ?",
                              chat.replace("-", "")) == [(None,)]
    delete.click()
    dialog.get_by_role("button", name="Delete").click()
    page.wait_for_url(re.compile(rf"/\?deleted={chat}$"))
    notice = page.locator("[data-undo-notice]")
    expect(notice).to_contain_text("Deleted “Keep me after all”.")
    expect(notice).to_be_focused()
    axe_in_both_themes(page)
    notice.get_by_role("button", name="Undo").click()
    page.wait_for_url(f"{relay_server.url}/c/{chat}/")
    expect(page.locator("h1[data-title]")).to_have_text("Keep me after all")
    assert relay_server.query("SELECT deleted_at FROM responses_app_conversation WHERE id = ?",
                              chat.replace("-", "")) == [(None,)]
    no_console_errors(page)


def test_pin_and_archive_from_the_pages(sessions: Any, relay_server: RelayServer) -> None:
    page = sized(sessions("boss"), 1280)
    wait_completed(page, submit_first_prompt(page, "Older topic", metadata=FAST))
    older = conversation_id(page)
    wait_completed(page, submit_first_prompt(page, "Newer topic", metadata=FAST))
    ready(page)
    assert sidebar_titles(page)[:2] == ["Newer topic", "Older topic"]
    page.goto(f"/c/{older}/")
    page.locator(".conversation-actions").get_by_role("button", name="Pin").click()
    expect(page.locator(".conversation-actions").get_by_role("button", name="Unpin")).to_be_visible()
    assert sidebar_titles(page)[:2] == ["Older topic", "Newer topic"]
    expect(item(page, older)).to_contain_text("pinned")
    page.locator(".conversation-actions").get_by_role("button", name="Archive").click()
    expect(page.locator("[data-archived-notice]")).to_be_visible()
    expect(item(page, older)).to_have_count(0)  # out of the sidebar
    page.goto("/")
    expect(page.locator(".conversations").get_by_text("Older topic")).to_have_count(0)
    page.get_by_role("link", name=re.compile(r"^Archived \(")).click()
    expect(page.get_by_role("heading", name="Archived conversations")).to_be_visible()
    assert_accessible(page)
    page.get_by_role("button", name="Unarchive Older topic").click()
    expect(page.locator(".conversations").get_by_text("Older topic")).to_have_count(0)
    page.goto("/")
    expect(page.locator(".conversations li").first).to_contain_text("Older topic")  # still pinned: first
    assert_accessible(page)
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_search_leaves_archived_out_until_the_box_is_ticked(sessions: Any, relay_server: RelayServer,
                                                             width: int) -> None:
    page = sized(sessions("alice"), width)
    word = f"quokka{width}"
    wait_completed(page, submit_first_prompt(page, f"Kept {word} notes", metadata=FAST))
    wait_completed(page, submit_first_prompt(page, f"Shelved {word} notes", metadata=FAST))
    page.locator(".conversation-actions").get_by_role("button", name="Archive").click()
    expect(page.locator("[data-archived-notice]")).to_be_visible()
    page.goto("/")
    form = page.get_by_role("search")
    box = form.get_by_role("checkbox", name="Include archived")
    expect(box).to_be_visible()
    expect(box).not_to_be_checked()
    form.get_by_role("searchbox", name="Search your conversations").fill(word)
    form.get_by_role("button", name="Search").click()
    expect(page.locator("[data-hit-count]")).to_have_text(f"1 turn found for “{word}”.")
    expect(page.locator(".search-hit")).to_contain_text("Kept")
    expect(page.locator("[data-hit-archived]")).to_have_count(0)
    form.get_by_role("checkbox", name="Include archived").check()
    form.get_by_role("button", name="Search").click()
    page.wait_for_url(re.compile(r"[?&]archived=1(&|$)"))
    expect(page.locator("[data-hit-count]")).to_have_text(f"2 turns found for “{word}”.")
    shelved = page.locator(".search-hit", has_text="Shelved")
    expect(shelved.locator("[data-hit-archived]")).to_have_text("archived")
    expect(shelved.locator("[data-hit-archived]")).to_be_visible()
    expect(page.locator(".search-hit", has_text="Kept").locator("[data-hit-archived]")).to_have_count(0)
    expect(page.get_by_role("checkbox", name="Include archived")).to_be_checked()  # kept in the address
    assert page.evaluate("() => document.scrollingElement.scrollWidth <= innerWidth"), "no horizontal scroll"
    search_box, label = page.locator("#search-q").bounding_box(), page.locator(".search-archived").bounding_box()
    assert search_box and label and label["x"] + label["width"] <= width, (search_box, label)
    axe_in_both_themes(page)
    no_console_errors(page)


def test_without_javascript_the_sidebar_and_undo_still_work(browser: Any, relay_server: RelayServer) -> None:
    context = browser.new_context(base_url=relay_server.url, java_script_enabled=False,
                                  viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.goto("/accounts/login/")
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", "pw")
        page.click("button[type=submit]")
        page.wait_for_url(f"{relay_server.url}/")
        page.fill("textarea[name=input]", "Plain pages only")
        page.click("#composer button[type=submit]")
        page.wait_for_url(re.compile(r"/c/[0-9a-f-]+/"))
        chat = conversation_id(page)
        bar = page.locator("[data-sidebar]")
        expect(bar).to_be_visible()  # beside the conversation, server-rendered
        expect(item(page, chat).locator("a")).to_have_attribute("aria-current", "page")
        expect(page.locator("[data-sidebar-toggle]")).to_be_hidden()  # a button that could not work
        expect(page.locator("[data-sidebar-filter]")).to_be_hidden()
        page.set_viewport_size({"width": 390, "height": 800})
        expect(bar.get_by_role("link", name="New chat")).to_be_visible()  # narrow: the two links
        expect(bar.get_by_role("link", name="All conversations")).to_be_visible()
        expect(item(page, chat)).to_be_hidden()
        page.locator(".conversation-actions").get_by_role("button", name="Delete").click()  # posts at once
        page.wait_for_url(re.compile(rf"/\?deleted={chat}$"))
        page.locator("[data-undo-notice]").get_by_role("button", name="Undo").click()
        page.wait_for_url(f"{relay_server.url}/c/{chat}/")
        assert relay_server.query("SELECT deleted_at FROM responses_app_conversation WHERE id = ?",
                                  chat.replace("-", "")) == [(None,)]
    finally:
        context.close()

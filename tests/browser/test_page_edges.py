"""The pages around the chat in Chromium, where a person sees them: a send refused because four
answers are running opens at the composer with the reason in words (focused, in view, the text
kept); a search result in an older version is shown for that page view only; a new share link
lands in view under the site's sticky header and copies (the clipboard API, and without it);
a link for signed-in people tells a logged-out visitor why to log in, a revoked one says so;
staff-only analytics refuse in a page. The database and the server's log are the oracles."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .axe import assert_accessible
from .conftest import RelayServer, open_sessions, serve
from .test_chat import submit_first_prompt
from .test_chat_page import sized

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

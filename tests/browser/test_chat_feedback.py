"""Feedback on an answer in Chromium at desktop and phone widths: Helpful and Not helpful are
toggle buttons that show what the server stored, a note is saved in place, a second press takes
the rating back, and a reload shows the same. The database is the oracle."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .axe import assert_accessible
from .conftest import RelayServer
from .test_chat import submit_first_prompt, turn, wait_completed
from .test_chat_page import FAST, WIDTHS, sized

pytestmark = pytest.mark.browser


def stored(server: RelayServer, request_id: str) -> list[tuple[Any, ...]]:
    return server.query("SELECT rating, note FROM responses_app_answerfeedback WHERE request_id = ?",
                        request_id.replace("-", ""))


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_an_answer_is_rated_with_a_note_and_the_rating_taken_back(sessions: Any, relay_server: RelayServer,
                                                                 width: int) -> None:
    page = sized(sessions("alice"), width)
    request_id = submit_first_prompt(page, f"Rate this answer at {width}", metadata=FAST)
    wait_completed(page, request_id)
    answer = turn(page, request_id)
    helpful = answer.get_by_role("button", name="Helpful", exact=True)
    not_helpful = answer.get_by_role("button", name="Not helpful")
    expect(helpful).to_have_attribute("aria-pressed", "false")
    url = page.url
    helpful.click()
    expect(helpful).to_have_attribute("aria-pressed", "true")
    expect(answer.get_by_role("status").filter(has_text="Marked helpful.")).to_be_visible()
    assert page.url == url, "the page stays where it is"
    assert stored(relay_server, request_id) == [(1, "")]

    not_helpful.click()
    expect(not_helpful).to_have_attribute("aria-pressed", "true")
    expect(helpful).to_have_attribute("aria-pressed", "false")
    answer.get_by_text("Add a note").click()
    answer.get_by_label("What helped, or what was wrong? (optional)").fill("It forgot the second question.")
    answer.get_by_role("button", name="Save note").click()
    expect(answer.get_by_role("status").filter(has_text="Note saved.")).to_be_visible()
    assert stored(relay_server, request_id) == [(-1, "It forgot the second question.")]
    assert_accessible(page)

    page.reload()
    answer = turn(page, request_id)
    expect(answer.get_by_role("button", name="Not helpful")).to_have_attribute("aria-pressed", "true")
    expect(answer.get_by_label("What helped, or what was wrong? (optional)")).to_have_value(
        "It forgot the second question.")
    answer.get_by_role("button", name="Not helpful").click()
    expect(answer.get_by_role("button", name="Not helpful")).to_have_attribute("aria-pressed", "false")
    expect(answer.get_by_role("status").filter(has_text="Rating removed.")).to_be_visible()
    assert stored(relay_server, request_id) == []

"""The chat page under a safety policy, in Chromium at phone (390×844) and desktop (1280×800):
buffered never shows the flagged phrase, progressive retracts it, the notice sits where the text
was stopped, reloads (mid-stream and after the end) show only what passed, and a flagged input
reads "Not sent". One server for all three: sim-text is buffered, sim-reasoning progressive, and
the precheck is on; the rule matches the simulator's echo of a prompt ("You asked: “…kumquat"),
never a prompt itself, so only the precheck test's prompt is refused before it is sent."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .conftest import ROOT, RelayServer, open_sessions, serve
from .test_chat import answer_text, server_text, submit_first_prompt, turn, wait_for_text
from .test_chat_page import no_console_errors, sized

pytestmark = pytest.mark.browser

# The echo of the prompt (a prompt itself never says "“Fine start"), flagged from "kumquat" on:
# the text is retracted from where the match starts. The second rule flags an input.
RULE = r"(?<=“Fine start\. Then the )kumquat,asked: “is a kumquat"
PROMPT = "Fine start. Then the kumquat zeppelin appears."
SLOW = {"sim.tokens_per_s": "3", "sim.seed": "3"}  # the flagged sentence comes a few seconds in
SIZES = {"phone": (390, 844), "desktop": (1280, 800)}
NOTICE = "Part of this answer was withheld by the safety policy"  # the turn's line; progressive: "retracted"


def shots(server: RelayServer) -> Path:
    """Where screenshots go: docs/ with RELAY_SCREENSHOT=1 (to refresh the README's), else the
    server's temporary folder, so a test run never changes the checkout."""
    return ROOT / "docs" if os.environ.get("RELAY_SCREENSHOT") == "1" else server.db_path.parent


@pytest.fixture(scope="module")
def safety_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayServer]:
    with serve(tmp_path_factory.mktemp("safety-server"), RELAY_SAFETY_MODE="off",
               RELAY_SAFETY_MODES="sim-text=buffered,sim-reasoning=progressive", RELAY_SAFETY_RULES=RULE,
               RELAY_SAFETY_PRECHECK="true") as server:
        yield server


@pytest.fixture
def users(browser: Any, safety_server: RelayServer) -> Iterator[Any]:
    yield from open_sessions(browser, safety_server)


def block_order(page: Page, request_id: str) -> list[str]:
    return [str(x) for x in turn(page, request_id).locator("[data-blocks] > [data-block-id]").evaluate_all(
        "els => els.map(e => e.classList.contains('block-text') ? 'text' : (e.dataset.blockId === 'safety-notice'"
        " ? 'notice' : e.className))")]


def ended_incomplete(page: Page, request_id: str, server: RelayServer, state: str) -> None:
    expect(turn(page, request_id).locator("[data-badge]")).to_have_attribute("data-badge", "incomplete",
                                                                            timeout=60_000)
    notice = turn(page, request_id).locator('[data-block-id="safety-notice"]')
    expect(notice).to_contain_text(f"The rest of this answer was {state} by the safety policy")
    expect(turn(page, request_id).locator("[data-error]")).to_have_text(
        f"Part of this answer was {state} by the safety policy.")  # the line says what the notice says
    assert "kumquat" not in answer_text(page, request_id)
    assert block_order(page, request_id)[-1] == "notice" and "text" in block_order(page, request_id)
    row = server.request_row(request_id)
    assert row["status"] == "incomplete" and "kumquat" not in row["final_text"]
    assert row["final_text"].startswith("You asked: “Fine start.")


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_buffered_shows_what_passed_and_says_the_rest_was_withheld(users: Any, safety_server: RelayServer,
                                                                  size: tuple[int, int]) -> None:
    page = sized(users("alice"), *size)
    request_id = submit_first_prompt(page, PROMPT, metadata=SLOW)
    wait_for_text(page, request_id, 5)  # the first sentence passed
    assert "kumquat" not in answer_text(page, request_id)
    live = turn(page, request_id).locator(".block-text")
    expect(live).to_have_count(1)
    assert live.inner_text().strip(), "no empty bubble: the block came with its first passed text"
    page.reload()  # mid-stream: the committed view holds only what passed
    assert turn(page, request_id).get_attribute("data-live") == "1", "the reload came after the end"
    assert "kumquat" not in answer_text(page, request_id)
    ended_incomplete(page, request_id, safety_server, "withheld")
    name = "phone" if size[0] < 600 else "desktop"
    page.screenshot(path=str(shots(safety_server) / f"safety-buffered-{name}.png"), full_page=False)
    page.reload()  # after the end: the server-rendered page
    assert "kumquat" not in answer_text(page, request_id) and "withheld" in answer_text(page, request_id)
    expect(turn(page, request_id).locator("[data-error]")).to_contain_text(NOTICE)
    assert "kumquat" not in server_text(page, request_id)
    no_console_errors(page)


def test_progressive_retracts_the_flagged_text_in_place(users: Any, safety_server: RelayServer) -> None:
    page = sized(users("alice"), *SIZES["desktop"])
    request_id = submit_first_prompt(page, PROMPT, model="sim-reasoning", metadata=SLOW)
    ended_incomplete(page, request_id, safety_server, "retracted")
    page.screenshot(path=str(shots(safety_server) / "safety-progressive-desktop.png"), full_page=False)
    page.reload()
    assert "kumquat" not in answer_text(page, request_id) and "kumquat" not in server_text(page, request_id)
    expect(turn(page, request_id).locator("[data-error]")).to_have_text(
        "Part of this answer was retracted by the safety policy.")  # the server's words, as the browser's
    no_console_errors(page)


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_a_flagged_input_is_not_sent(users: Any, safety_server: RelayServer, size: tuple[int, int]) -> None:
    page = sized(users("alice"), *size)
    request_id = submit_first_prompt(page, "They asked: “is a kumquat edible?”", metadata=SLOW)
    expect(turn(page, request_id).locator("[data-error]")).to_contain_text("Not sent", timeout=30_000)
    expect(turn(page, request_id).locator("[data-badge]")).to_have_attribute("data-badge", re.compile("failed|error"))
    assert answer_text(page, request_id).strip() == ""
    row = safety_server.request_row(request_id)
    assert row["final_text"] == ""
    if size[0] < 600:
        page.screenshot(path=str(shots(safety_server) / "safety-precheck-phone.png"), full_page=False)
    no_console_errors(page)

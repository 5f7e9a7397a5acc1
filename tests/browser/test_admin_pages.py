"""The admin's request page and the analytics page as staff read them, in Chromium: inline rows
that say what they are, times to the second, no sideways scroll at 1280 px; a colour per model."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .axe import assert_accessible
from .conftest import RelayServer
from .test_chat import submit_first_prompt, turn, wait_completed
from .test_chat_page import FAST, no_console_errors, send_reply, sized

pytestmark = pytest.mark.browser

SECOND = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def auditor(server: RelayServer) -> str:
    """A superuser with the personas' password, made once per server."""
    server.query("INSERT OR IGNORE INTO auth_user (password, is_superuser, username, first_name, last_name, email, "
                 "is_staff, is_active, date_joined) SELECT password, 1, 'auditor', '', '', '', 1, 1, date_joined "
                 "FROM auth_user WHERE username = 'boss'")
    return "auditor"


def test_the_request_page_says_what_each_row_is_to_the_second_at_1280(sessions: Any,
                                                                       relay_server: RelayServer) -> None:
    page = sized(sessions("alice"), 1280)
    asked = submit_first_prompt(page, "Roll the dice", model="sim-mcp-approval", metadata=FAST)
    approve = turn(page, asked).locator(".approval button[data-approve=true]")
    expect(approve).to_be_visible(timeout=20_000)
    approve.click()
    wait_completed(page, asked)
    unbroken = "https://example.org/" + "a" * 300 + " " + "y" * 200  # a prompt and an answer of long words
    called = send_reply(page, unbroken, model="sim-function", metadata=FAST)
    wait_completed(page, called)

    admin = sized(sessions(auditor(relay_server)), 1280)
    for request_id in (asked, called):
        admin.goto(f"/admin/responses_app/responserequest/{request_id}/change/")
        text = admin.locator("#content").inner_text()
        assert "object (" not in text, re.findall(r"\w+ object \(\d+\)", text)
        assert re.search(r"segment 0 \(initial\): completed", text) and re.search(r"revision \d+ \(", text)
        assert len(SECOND.findall(text)) >= 4, "times to the second"
        sideways = admin.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert sideways <= 0, f"the request page scrolls sideways by {sideways} px"
        wider = admin.evaluate("""() => Array.from(document.querySelectorAll("#content table")).filter((t) =>
            t.getBoundingClientRect().width > t.closest("fieldset, .module").getBoundingClientRect().width + 1)
            .map((t) => t.closest(".inline-group, fieldset").id || t.outerHTML.slice(0, 60))""")
        assert not wider, f"tables wider than their box: {wider}"
    admin.goto(f"/admin/responses_app/responserequest/{asked}/change/")
    expect(admin.locator(".inline-related", has_text="MCP approval").first).to_contain_text("approved")
    admin.goto(f"/admin/responses_app/responserequest/{called}/change/")
    expect(admin.get_by_text(re.compile(r"get_weather call_\w+ \(done\)"))).to_have_count(1)
    admin.goto("/admin/responses_app/responserequest/")
    assert len(SECOND.findall(admin.locator("#result_list").inner_text())) >= 2  # (the admin has no favicon: a 404)


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
def test_analytics_gives_each_model_its_own_colour(sessions: Any, width: int) -> None:
    page = sized(sessions("alice"), width)
    first = submit_first_prompt(page, "One", metadata=FAST)
    wait_completed(page, first)
    for model in ("sim-long", "sim-reasoning"):
        wait_completed(page, send_reply(page, f"With {model}", model=model, metadata=FAST))
    boss = sized(sessions("boss"), width)
    boss.goto("/analytics/?days=7")
    colours = boss.locator("[data-model-color]").evaluate_all(
        "items => items.map((i) => [i.dataset.modelColor, getComputedStyle(i).backgroundColor])")
    assert len(colours) >= 3 and len({c for _, c in colours}) == len(colours), colours
    expect(boss.locator("[data-latency=ttft] th")).to_have_text("Time to first text")
    assert_accessible(boss)
    no_console_errors(boss)

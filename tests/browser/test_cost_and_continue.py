"""Cost and "continue this conversation" in Chromium, at desktop (1280 px) and phone (390 px): an
answer's usage line ends with its cost, the conversation's total under its title appears as the
answer finishes (no reload) and marks a stopped answer's estimate "≈"; a signed-in visitor of a
share link continues the conversation as their own copy and replies in it, chained to nothing of
the owner's. The demo prices its simulator models (project/settings.py); the server's database is
the oracle. Background mode is off here, so a stopped answer's usage is the relay's estimate."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .axe import assert_accessible
from .conftest import RelayServer, open_sessions, serve
from .test_chat import submit_first_prompt, turn, wait_completed, wait_for_text
from .test_chat_page import FAST, WIDTHS, no_console_errors, send_reply, sized
from .test_chat_tools import make_link, no_sideways_scroll

pytestmark = pytest.mark.browser

DEMO = {"input": Decimal("2.00"), "cached_input": Decimal("0.50"), "output": Decimal("8.00")}  # project/settings.py
LONG = {"sim.tokens": "3000", "sim.tokens_per_s": "60", "sim.seed": "4"}
MONEY = r"\$\d+\.\d{4}"


@pytest.fixture(scope="module")
def cost_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayServer]:
    with serve(tmp_path_factory.mktemp("relay-cost"), RELAY_BACKGROUND_DEFAULT="false") as server:
        yield server


@pytest.fixture
def people(browser: Any, cost_server: RelayServer) -> Iterator[Any]:
    yield from open_sessions(browser, cost_server)


def cost_of_rows(server: RelayServer, where: str, *params: Any) -> tuple[Decimal, bool]:
    """The oracle: the rows' usage priced at the demo's prices, and whether any was estimated."""
    total, estimated = Decimal(0), False
    for (usage,) in server.query(f"SELECT usage FROM responses_app_responserequest WHERE {where}", *params):
        used = json.loads(usage) if usage else {}
        cached = (used.get("input_tokens_details") or {}).get("cached_tokens") or 0
        total += ((used.get("input_tokens", 0) - cached) * DEMO["input"] + cached * DEMO["cached_input"]
                  + used.get("output_tokens", 0) * DEMO["output"]) / 1_000_000
        estimated = estimated or bool(used.get("estimated"))
    return total, estimated


def words(amount: Decimal, estimated: bool) -> str:
    # Half up, as pricing.money rounds: Decimal's default, half even, read $0.00065 as $0.0006.
    return ("≈ " if estimated else "") + "$" + str(amount.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))


def in_view(page: Page, locator: Any) -> None:
    box = locator.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"] + 1, box


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_an_answer_and_its_conversation_show_what_they_cost(people: Any, cost_server: RelayServer,
                                                            width: int) -> None:
    page = sized(people("alice"), width)
    first = submit_first_prompt(page, f"What does this cost {uuid.uuid4().hex[:6]}", metadata=FAST)
    total = page.locator("[data-conversation-cost]")
    wait_completed(page, first)
    cost = turn(page, first).locator('[data-usage="cost"]')
    amount, estimated = cost_of_rows(cost_server, "id = ?", first.replace("-", ""))
    assert amount > 0 and not estimated
    expect(cost).to_have_text(words(amount, False))
    expect(total).to_be_visible()  # refreshed from the finished turn: the page was not reloaded
    expect(total).to_have_text(f"Answers in this conversation cost {words(amount, False)}")
    in_view(page, cost)

    stopped = send_reply(page, "Go on at length", metadata=LONG, model="sim-long")
    wait_for_text(page, stopped, 200)
    page.locator("#composer [data-stop-latest]").click()
    expect(turn(page, stopped).locator("[data-badge]")).to_have_attribute("data-badge", "cancelled")
    expect(turn(page, stopped)).to_have_attribute("data-finished", "1")  # measured after the swap
    estimate = turn(page, stopped).locator('[data-usage="cost"]')
    expect(estimate).to_have_text(re.compile(rf"^≈ {MONEY}$"))
    expect(turn(page, stopped).locator('[data-usage="output"]')).to_have_text(re.compile(r"^≈ \d+ out$"))
    conversation = page.url.split("/c/")[1].split("/")[0].replace("-", "")
    whole, any_estimate = cost_of_rows(cost_server, "conversation_id = ?", conversation)
    assert any_estimate
    expect(total.locator("[data-cost-total]")).to_have_text(words(whole, True))
    in_view(page, estimate)
    no_sideways_scroll(page)
    assert "RELAY_" not in page.content()
    page.reload()
    expect(total.locator("[data-cost-total]")).to_have_text(words(whole, True))
    assert_accessible(page)
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_visitor_continues_a_shared_conversation_as_their_own(people: Any, cost_server: RelayServer,
                                                                width: int) -> None:
    owner = sized(people("alice"), 1280)
    first = submit_first_prompt(owner, f"Share and continue {uuid.uuid4().hex[:6]}", metadata=FAST)
    wait_completed(owner, first)
    link = make_link(owner)
    answer = cost_server.request_row(first)["final_text"]

    visitor = sized(people("bob"), width)
    visitor.goto(link)
    button = visitor.get_by_role("button", name="Continue this conversation")
    expect(button).to_be_visible()
    in_view(visitor, button)
    no_sideways_scroll(visitor)
    assert_accessible(visitor)
    button.click()
    visitor.wait_for_url(re.compile(r"/c/[0-9a-f-]+/$"))
    copied = str(visitor.locator("article.turn").last.get_attribute("data-request-id"))
    assert copied != first
    expect(turn(visitor, copied).locator("[data-blocks]")).to_contain_text(answer.split("\n")[0][:40])
    expect(turn(visitor, copied).locator('[data-usage="cost"]')).to_have_count(0)  # nobody paid for a copy
    expect(visitor.locator("#composer")).to_be_visible()

    reply = send_reply(visitor, "And then?", metadata=FAST)
    wait_completed(visitor, reply)
    [(params, conversation, owner_name)] = cost_server.query(
        "SELECT r.params, r.conversation_id, u.username FROM responses_app_responserequest r "
        "JOIN auth_user u ON u.id = r.owner_id WHERE r.id = ?", reply.replace("-", ""))
    sent = json.loads(params)
    assert owner_name == "bob" and "previous_response_id" not in sent and sent.get("full_context") is True
    assert cost_server.query("SELECT COUNT(*) FROM responses_app_responserequest WHERE conversation_id = ? "
                             "AND copy_of IS NOT NULL", conversation) == [(1,)]
    assert cost_server.query("SELECT COUNT(*) FROM responses_app_responserequest WHERE id = ? OR copy_of = ?",
                             first.replace("-", ""), first.replace("-", "")) == [(2,)]
    no_sideways_scroll(visitor)
    assert_accessible(visitor)
    no_console_errors(visitor)

"""Cost in currency (pricing.py): per answer beside its usage line, per conversation under its
title, per model and per day in the analytics, from RELAY_PRICES in RELAY_CURRENCY. Money is
Decimal from the setting to the words; a stopped answer's estimated usage gives an estimate ("≈");
a model without a price has no cost, never a zero one; no prices, no cost anywhere."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from responses_app import pricing, selectors, services
from responses_app.conf import app_settings
from responses_app.models import ResponseRequest
from responses_app.ops import analytics
from tests.conftest import relay_check_errors
from tests.web.test_pages import client_for, make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]

PRICES = {"sim-text": {"input": "2.50", "cached_input": "1.25", "output": "10"},
          "sim-rich": {"input": 0.1, "output": 0.4}}
USAGE = {"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 400}, "output_tokens": 500,
         "output_tokens_details": {"reasoning_tokens": 100}, "total_tokens": 1500}
STOPPED = {"output_tokens": 250, "total_tokens": 250, "estimated": True}  # streaming/usage.py's estimate


def answer(owner: Any, conversation: Any, usage: dict[str, Any] | None, model: str = "sim-text",
           created: Any = None) -> ResponseRequest:
    request, _ = services.request_create(owner=owner, input="Hi", model=model, conversation=conversation,
                                         client_request_id=str(uuid.uuid4()))
    ResponseRequest.objects.filter(pk=request.pk).update(status="completed", usage=usage,
                                                         created=created or timezone.now())
    return request


# --- the money -------------------------------------------------------------------------------------

def test_prices_are_decimal_and_a_cost_is_exact(settings: Any) -> None:
    settings.RELAY_PRICES = PRICES
    assert app_settings.PRICES["sim-rich"] == {"input": Decimal("0.1"), "output": Decimal("0.4")}, "a float by its text"
    cost = pricing.cost_of(USAGE, "sim-text")
    # 600 uncached at 2.50, 400 cached at 1.25, 500 output (reasoning among them) at 10, per million
    assert cost == pricing.Cost(Decimal("0.0070"), estimated=False)
    assert isinstance(cost.amount, Decimal)
    rich = pricing.cost_of(USAGE, "sim-rich")  # no cached price: cached input at the input price
    assert rich is not None and rich.amount == Decimal("0.0003"), "exact, where floats give 0.00030000000000000003"
    assert pricing.cost_of(USAGE, "gpt-unknown") is None, "no price: no cost, not zero"
    assert pricing.cost_of(None, "sim-text") is None
    estimate = pricing.cost_of(STOPPED, "sim-text")
    assert estimate == pricing.Cost(Decimal("0.0025"), estimated=True), "output only: its input is not known"


@pytest.mark.parametrize(("amount", "currency", "words"), [
    ("0.0070", "USD", "$0.0070"), ("0.00004", "USD", "< $0.0001"), ("0", "USD", "$0.0000"),
    ("12.345", "EUR", "€12.35"), ("1204.5", "GBP", "£1,204.50"), ("0.02", "CHF", "CHF 0.0200"),
])
def test_money_reads_with_its_currency(amount: str, currency: str, words: str) -> None:
    assert pricing.money(Decimal(amount), currency) == words


def test_totals_mark_estimates_and_say_what_they_leave_out(settings: Any) -> None:
    settings.RELAY_PRICES = PRICES
    total = pricing.total_of([(USAGE, "sim-text"), (STOPPED, "sim-text"), (USAGE, "gpt-unknown"), (None, "sim-text")])
    assert total == pricing.Total(pricing.Cost(Decimal("0.0095"), estimated=True), priced=2, unpriced=1)
    assert pricing.total_text(total) == "≈ $0.0095 (not counting 1 answer of models without a price)"
    assert pricing.total_text(pricing.total_of([(USAGE, "gpt-unknown")])) == "", "nothing priced: no words"


@pytest.mark.parametrize(("setting", "value", "message"), [
    ("RELAY_CURRENCY", "dollars", "three-letter currency code"),
    ("RELAY_CURRENCY", 840, "must be a string"),
    ("RELAY_PRICES", {"m": {"input": 1.0, "output": float("inf")}}, "non-negative number"),
    ("RELAY_PRICES", {"m": {"input": [1], "output": 1}}, "non-negative number"),
])
def test_bad_currency_and_prices_are_reported_by_manage_py_check(setting: str, value: Any, message: str,
                                                                 settings: Any) -> None:
    setattr(settings, setting, value)
    assert [(e.id, message in e.msg) for e in relay_check_errors()] == [("responses_app.E002", True)]


def test_the_currency_is_read_from_its_setting(settings: Any) -> None:
    settings.RELAY_CURRENCY = "eur"
    assert app_settings.CURRENCY == "EUR" and relay_check_errors() == []
    assert pricing.money(Decimal("0.5")) == "€0.5000"


def test_the_demo_prices_its_simulator_models() -> None:
    from django.conf import settings

    from responses_app.simulator.scenarios import SCENARIOS

    with override_settings(RELAY_PRICES=settings.RELAY_PRICES):
        assert set(app_settings.PRICES) == set(SCENARIOS) and relay_check_errors() == []


# --- the pages ---------------------------------------------------------------------------------------

def test_an_answer_shows_its_cost_and_a_stopped_one_an_estimate(owner: Any, settings: Any) -> None:
    settings.RELAY_PRICES = PRICES
    turn = make_turn(owner)
    ResponseRequest.objects.filter(pk=turn.pk).update(usage=USAGE)
    stopped = answer(owner, turn.conversation, STOPPED)
    unpriced = answer(owner, turn.conversation, USAGE, model="gpt-unknown")
    page = client_for(owner).get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    assert '<span data-usage="cost">$0.0070</span>' in page
    assert '<span data-usage="cost" data-estimated>≈ $0.0025</span>' in page
    assert page.count('data-usage="cost"') == 2, "the unknown model's answer shows tokens and no cost"
    assert "≈ $0.0095 (not counting 1 answer of models without a price)" in page, "the conversation's total"
    for request in (stopped, unpriced):
        turn_html = client_for(owner).get(reverse("responses_app:chat-turn", args=[turn.conversation_id,
                                                                                   request.pk])).content.decode()
        assert 'data-conversation-total="≈ $0.0095 (not counting 1 answer' in turn_html, "the script's refresh"


def test_no_prices_no_cost_anywhere(owner: Any, staff: Any, settings: Any) -> None:
    settings.RELAY_PRICES = {}
    turn = make_turn(owner)
    ResponseRequest.objects.filter(pk=turn.pk).update(usage=USAGE)
    chat = client_for(owner).get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    listing = client_for(owner).get(reverse("responses_app:conversations")).content.decode()
    for html in (chat, listing):
        assert "1000 in" in html or "1500 tokens" in html
        assert 'data-usage="cost"' not in html and "data-conversation-cost" not in html and "$" not in html
    stats = client_for(staff).get(reverse("responses_app:analytics")).content.decode()
    assert "No prices are set for the models here" in stats and "RELAY_" not in stats


def test_a_conversation_costs_every_version_of_its_turns(owner: Any, settings: Any) -> None:
    settings.RELAY_PRICES = PRICES
    turn = make_turn(owner)
    ResponseRequest.objects.filter(pk=turn.pk).update(usage=USAGE)
    version = answer(owner, turn.conversation, USAGE)  # a regenerated answer: not on the branch shown
    ResponseRequest.objects.filter(pk=version.pk).update(parent=turn.parent)
    total = selectors.conversation_cost(conversation_id=turn.conversation_id)
    assert total == pricing.Total(pricing.Cost(Decimal("0.0140")), priced=2)


def test_analytics_cost_per_model_and_per_day(owner: Any, staff: Any, settings: Any) -> None:
    settings.RELAY_PRICES = PRICES
    conversation = services.conversation_create(owner=owner)
    today = timezone.now()
    answer(owner, conversation, USAGE, created=today)
    answer(owner, conversation, STOPPED, created=today - timedelta(days=2))
    answer(owner, conversation, USAGE, model="sim-rich", created=today - timedelta(days=2))
    answer(owner, conversation, USAGE, model="gpt-unknown", created=today)
    answer(owner, conversation, None, created=today)  # never reached the model: not an answer anyone paid for
    costs = analytics.costs(analytics.DateRange.last_days(7))
    assert costs is not None
    assert [(model, pricing.total_text(total)) for model, total in costs["by_model"]] == [
        ("sim-text", "≈ $0.0095"), ("sim-rich", "$0.0003"), ("gpt-unknown", "")]
    by_day = {day: pricing.total_text(total) for day, total in costs["by_day"]}
    assert len(by_day) == 7
    assert by_day[timezone.localdate(today)] == "$0.0070 (not counting 1 answer of models without a price)"
    assert by_day[timezone.localdate(today - timedelta(days=2))] == "≈ $0.0028"
    assert by_day[timezone.localdate(today - timedelta(days=1))] == ""
    html = client_for(staff).get(reverse("responses_app:analytics") + "?days=7").content.decode()
    assert 'data-stat="cost">≈ $0.0098 (not counting 1 answer of models without a price)</strong>' in html
    assert '<tr data-cost-model="gpt-unknown"><th scope="row">gpt-unknown</th><td>1</td><td>no price set</td>' in html
    assert '<tr data-cost-model="sim-text"><th scope="row">sim-text</th><td>2</td><td>≈ $0.0095</td>' in html


def test_the_admin_shows_a_request_s_cost(owner: Any, staff: Any, settings: Any) -> None:
    settings.RELAY_PRICES = PRICES
    root = type(staff).objects.create_superuser("root", password="pw")
    conversation = services.conversation_create(owner=owner)
    priced, stopped, unpriced = (answer(owner, conversation, STOPPED if usage == "stopped" else USAGE, model=model)
                                 for usage, model in (("", "sim-text"), ("stopped", "sim-text"), ("", "gpt-unknown")))
    client = client_for(root)
    for request, shown in ((priced, "$0.0070"), (stopped, "≈ $0.0025"), (unpriced, "-")):
        html = client.get(reverse("admin:responses_app_responserequest_change", args=[request.pk])).content.decode()
        assert f'<div class="readonly">{shown}</div>' in html, shown

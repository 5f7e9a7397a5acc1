"""Money for tokens: what an answer, a conversation or a day cost at the prices the site set
(RELAY_PRICES, per million tokens per model, in RELAY_CURRENCY).

Always `Decimal`, never float: prices are read as Decimal (conf_values.prices), sums stay exact
and only the words round. An answer stopped before the provider reported its usage has the
usage streaming/usage.py estimated (`"estimated": true`, its output only): its cost is an
estimate too, and so is every total it is part of ("≈"). A model without a price has no cost,
never a zero one: totals count the answers they could not price (`unpriced`), and say so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from .conf import app_settings

MILLION = Decimal(1_000_000)
SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}
_SMALLEST = Decimal("0.0001")  # under a dollar the words keep four places: an answer costs fractions of a cent
_CENTS = Decimal("0.01")


@dataclass(frozen=True, slots=True)
class Cost:
    amount: Decimal
    estimated: bool = False  # some of it was estimated from what a stopped answer streamed

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.amount + other.amount, self.estimated or other.estimated)


@dataclass(frozen=True, slots=True)
class Total:
    """What several answers cost: `cost` of the priced ones (None: none was), and how many of the
    answers with usage had a model without a price."""

    cost: Cost | None = None
    priced: int = 0
    unpriced: int = 0

    def add(self, cost: Cost | None) -> Total:
        if cost is None:
            return Total(self.cost, self.priced, self.unpriced + 1)
        return Total(cost if self.cost is None else self.cost + cost, self.priced + 1, self.unpriced)


def cost_of(usage: Any, model: str, prices: Mapping[str, Mapping[str, Decimal]] | None = None) -> Cost | None:
    """One answer's cost, or None: no usage, or no price for its model. Cached input tokens (part of
    input_tokens) at the cached price, reasoning tokens (part of output_tokens) as output."""
    price = (app_settings.PRICES if prices is None else prices).get(model)
    if not price or not isinstance(usage, dict):
        return None
    input_tokens = _count(usage.get("input_tokens"))
    details = usage.get("input_tokens_details")
    cached = min(_count(details.get("cached_tokens")) if isinstance(details, dict) else 0, input_tokens)
    output_tokens = _count(usage.get("output_tokens"))
    if not (input_tokens or output_tokens):
        return None
    input_price = price["input"]
    amount = ((input_tokens - cached) * input_price + cached * price.get("cached_input", input_price)
              + output_tokens * price["output"]) / MILLION
    return Cost(amount, bool(usage.get("estimated")))


def total_of(rows: Iterable[tuple[Any, str]], total: Total | None = None) -> Total:
    """The total of (usage, model) rows (added to `total`); rows without usage are not answers
    anyone paid for."""
    total = total or Total()
    for usage, model in rows:
        if billed(usage):
            total = total.add(cost_of(usage, model))
    return total


def billed(usage: Any) -> bool:
    """The usage of an answer that used tokens (a turn that never reached the model has none)."""
    return isinstance(usage, dict) and bool(_count(usage.get("input_tokens")) or _count(usage.get("output_tokens")))


def money(amount: Decimal, currency: str | None = None) -> str:
    """`$0.0045`, `$12.30`, `€1,204.50`, `CHF 0.0200`: two places from one unit up, four under it
    (`< $0.0001` for less than that, but not nothing)."""
    currency = currency or app_settings.CURRENCY
    places = _CENTS if amount >= 1 else _SMALLEST
    rounded = amount.quantize(places, rounding=ROUND_HALF_UP)
    less = amount > 0 and rounded == 0
    number = f"{(places if less else rounded):,}"
    symbol = SYMBOLS.get(currency)
    words = f"{symbol}{number}" if symbol else f"{currency} {number}"
    return f"< {words}" if less else words


def cost_text(cost: Cost | None, currency: str | None = None) -> str:
    """The words for a cost: `≈ ` before an estimate; empty for none."""
    if cost is None:
        return ""
    return ("≈ " if cost.estimated else "") + money(cost.amount, currency)


def total_text(total: Total | None, currency: str | None = None) -> str:
    """A total in words, with the answers it leaves out: `≈ $0.0123 (not counting 2 answers of
    models without a price)`; empty when nothing was priced."""
    if total is None or total.cost is None:
        return ""
    words = cost_text(total.cost, currency)
    if total.unpriced:
        plural = "s" if total.unpriced != 1 else ""
        words += f" (not counting {total.unpriced} answer{plural} of models without a price)"
    return words


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

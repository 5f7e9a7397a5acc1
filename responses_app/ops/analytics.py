"""Analytics queries: pure functions over a date range [start, end) of request creation days.

One row per logical request (ResponseRequest), counted on the day it was created, however many
tabs, reloads, resubmits (idempotency key) or upstream segments it had. Token usage comes from
the `usage` saved from the terminal Response only. Percentiles are computed in Python from
`values_list`, which is plenty for a relay's volumes.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from .. import feedback, pricing
from ..conf import app_settings
from ..models import McpApproval, ResponseRequest, Segment
from ..streaming.vocabulary import INPUT_FLAGGED


@dataclass(frozen=True)
class DateRange:
    start: date  # inclusive
    end: date  # exclusive

    @classmethod
    def last_days(cls, days: int, today: date | None = None) -> DateRange:
        today = today or timezone.localdate()
        return cls(today - timedelta(days=days - 1), today + timedelta(days=1))

    def bounds(self) -> tuple[datetime, datetime]:
        tz = timezone.get_current_timezone()
        return (timezone.make_aware(datetime.combine(self.start, time.min), tz),
                timezone.make_aware(datetime.combine(self.end, time.min), tz))

    def days(self) -> list[date]:
        return [self.start + timedelta(days=i) for i in range((self.end - self.start).days)]


def requests_in(period: DateRange) -> QuerySet[ResponseRequest]:
    start, end = period.bounds()
    # A turn copied from a shared conversation (shares.share_continue) was never a request of anyone's.
    return ResponseRequest.objects.filter(created__gte=start, created__lt=end, copy_of__isnull=True)


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100) of unsorted values; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def percentiles(values: list[float]) -> dict[str, float | None]:
    return {"p50": percentile(values, 50), "p90": percentile(values, 90), "p99": percentile(values, 99),
            "count": len(values)}  # type: ignore[dict-item]


def per_day(period: DateRange, field: str) -> list[dict[str, Any]]:
    """[{"day": date, "counts": {value of `field`: n}, "total": n}] for every day of the range."""
    rows = (requests_in(period).annotate(day=TruncDate("created")).values("day", field)
            .annotate(n=Count("id")).order_by())
    counts: dict[date, Counter[str]] = defaultdict(Counter)
    for row in rows:
        counts[row["day"]][row[field]] += row["n"]
    return [{"day": day, "counts": dict(counts.get(day, {})), "total": sum(counts.get(day, Counter()).values())}
            for day in period.days()]


def totals_by(period: DateRange, field: str) -> list[tuple[str, int]]:
    rows = requests_in(period).values(field).annotate(n=Count("id")).order_by("-n", field)
    return [(row[field], row["n"]) for row in rows]


def time_to_first_text_ms(period: DateRange) -> list[float]:
    """first_text_at - created, in ms, for requests that showed text, without the time a person
    took to answer an MCP approval before it (the clock stops while someone is asked)."""
    rows = list(requests_in(period).filter(first_text_at__isnull=False).values_list("pk", "created", "first_text_at"))
    waits = approval_waits([pk for pk, _, _ in rows])
    return [max(0.0, ((first - created) - waited(waits.get(pk, []), first)).total_seconds() * 1000)
            for pk, created, first in rows if first is not None]


def approval_waits(request_ids: list[Any]) -> dict[Any, list[tuple[datetime, datetime]]]:
    """Per request, each time it waited for a person: from the end of the response that asked
    (its segment's end) to the last answer given before the next response began."""
    decided: dict[Any, list[datetime]] = defaultdict(list)
    for request_id, at in McpApproval.objects.filter(request_id__in=request_ids).values_list("request_id",
                                                                                           "decided_at"):
        decided[request_id].append(at)
    if not decided:
        return {}
    ends: dict[Any, list[datetime]] = defaultdict(list)
    for request_id, ended in (Segment.objects.filter(request_id__in=list(decided), ended_at__isnull=False)
                              .values_list("request_id", "ended_at")):
        if ended is not None:
            ends[request_id].append(ended)
    waits: dict[Any, list[tuple[datetime, datetime]]] = {}
    for request_id, answers in decided.items():
        spans: dict[datetime, datetime] = {}
        for answer in answers:
            asked = max((end for end in ends.get(request_id, []) if end <= answer), default=None)
            if asked is not None:
                spans[asked] = max(answer, spans.get(asked, answer))
        waits[request_id] = sorted(spans.items())
    return waits


def waited(spans: list[tuple[datetime, datetime]], until: datetime) -> timedelta:
    """How long of the time before `until` was spent waiting."""
    return sum((min(end, until) - start for start, end in spans if start < until), timedelta())


def durations_ms(period: DateRange) -> list[float]:
    return [float(v) for v in requests_in(period).filter(duration_ms__isnull=False)
            .values_list("duration_ms", flat=True) if v is not None]


def viewer_totals(period: DateRange) -> dict[str, int]:
    """Viewer connections (every websocket a tab opened) and, separately, the reconnects among them."""
    # No joins here: a join to segments would multiply the sums.
    sums = requests_in(period).aggregate(connections=Sum("viewer_connections"), reconnects=Sum("reconnects"))
    return {"connections": sums["connections"] or 0, "reconnects": sums["reconnects"] or 0,
            "first_connections": (sums["connections"] or 0) - (sums["reconnects"] or 0)}


def token_usage(period: DateRange) -> dict[str, int]:
    """Summed from each request's `usage`: its responses' own (never from chunks), or estimated
    from what a response streamed when it ended with none (a Stop; `estimated`: how many)."""
    totals = {"input_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0, "total_tokens": 0, "requests": 0,
              "estimated": 0}
    for usage in requests_in(period).filter(usage__isnull=False).values_list("usage", flat=True):
        if not isinstance(usage, dict):
            continue
        totals["requests"] += 1
        totals["estimated"] += bool(usage.get("estimated"))
        for key in ("input_tokens", "output_tokens", "total_tokens"):
            value = usage.get(key)
            if isinstance(value, int):
                totals[key] += value
        details = usage.get("output_tokens_details") or {}
        if isinstance(details, dict) and isinstance(details.get("reasoning_tokens"), int):
            totals["reasoning_tokens"] += details["reasoning_tokens"]
    return totals


def costs(period: DateRange) -> dict[str, Any] | None:
    """What the answers of the period cost at the site's prices (pricing.py), in total, per model
    (the dearest first; a model without a price counts its answers) and per day; None where no
    prices are set. From each request's `usage`, estimated ones marked."""
    if not app_settings.PRICES:
        return None
    total = pricing.Total()
    by_model: dict[str, pricing.Total] = {}
    by_day: dict[date, pricing.Total] = {}
    rows = (requests_in(period).filter(usage__isnull=False).annotate(day=TruncDate("created"))
            .values_list("day", "model", "usage"))
    for day, model, usage in rows.iterator():
        if not pricing.billed(usage):
            continue
        cost = pricing.cost_of(usage, model)
        total = total.add(cost)
        by_model[model] = by_model.get(model, pricing.Total()).add(cost)
        by_day[day] = by_day.get(day, pricing.Total()).add(cost)
    models = sorted(by_model.items(), key=lambda row: (-(row[1].cost.amount if row[1].cost else -1), row[0]))
    return {"total": total, "by_model": models, "by_day": [(day, by_day.get(day)) for day in period.days()]}


def stream_health(period: DateRange) -> dict[str, int]:
    sums = requests_in(period).aggregate(
        events=Sum("events"), duplicates=Sum("duplicates"), gaps=Sum("gaps"), retries=Sum("retries"),
        disconnects=Sum("disconnects"), cancels=Sum("cancels"), malformed=Sum("malformed_events"))
    return {k: v or 0 for k, v in sums.items()}


CONTENT_FILTER = "content_filter"  # the API's own incomplete reason, which the safety gate uses too


def safety_blocked(period: DateRange) -> dict[str, int]:
    """Requests the safety policy stopped, each once: its answer cut (`content_filter`) or its input
    never sent (`input_flagged`); never from SafetyVerdict rows, of which one request has many."""
    cut = Q(incomplete_reason=CONTENT_FILTER)
    flagged = Q(error_code=INPUT_FLAGGED)
    counts = requests_in(period).aggregate(total=Count("id", filter=cut | flagged),
                                           content_filter=Count("id", filter=cut),
                                           input_flagged=Count("id", filter=flagged & ~cut))
    return {key: value or 0 for key, value in counts.items()}


def summary(period: DateRange) -> dict[str, Any]:
    """Everything the analytics page shows."""
    status_days = per_day(period, "status")
    model_days = per_day(period, "model")
    return {
        "period": period,
        "total": requests_in(period).count(),
        "by_status": totals_by(period, "status"),
        "by_model": totals_by(period, "model"),
        "status_days": status_days,
        "model_days": model_days,
        "ttft": percentiles(time_to_first_text_ms(period)),
        "duration": percentiles(durations_ms(period)),
        "viewers": viewer_totals(period),
        "tokens": token_usage(period),
        "costs": costs(period),
        "health": stream_health(period),
        "safety": safety_blocked(period),
        "owners": requests_in(period).values("owner").distinct().count(),
        "feedback": feedback.summary(since=period.bounds()[0], until=period.bounds()[1]),
    }


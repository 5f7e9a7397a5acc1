"""The analytics page, for staff: counts, latencies and costs over the last days, with charts."""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from ..ops import analytics
from .charts import series_color
from .pages import page, refused_page
from .turns import BADGE_LABELS

STATUS_ORDER = ["completed", "streaming", "pending", "incomplete", "failed", "error", "cancelled", "unknown"]


@require_GET
def analytics_page(http: HttpRequest) -> HttpResponse:
    if not http.user.is_authenticated:
        return redirect_to_login(http.get_full_path())
    if not http.user.is_staff:
        return refused_page(http, 403, "Analytics are for staff", (
            f"You are signed in as {http.user.get_username()}. Only staff accounts can see the analytics; "
            "ask an administrator if you need them."))
    try:
        days = min(max(int(http.GET.get("days", "14")), 1), 366)
    except ValueError:
        days = 14
    period = analytics.DateRange.last_days(days)
    data = analytics.summary(period)
    present = {status for status, _ in data["by_status"]}
    status_keys = [s for s in STATUS_ORDER if s in present] + sorted(present - set(STATUS_ORDER))
    model_keys = [m for m, _ in data["by_model"]]
    return page(http, "responses_app/analytics.html", {
        **data,
        "days": days,
        "day_choices": [7, 14, 30, 90],
        "status_keys": status_keys,
        "status_legend": [(s, series_color(s, i)) for i, s in enumerate(status_keys)],
        "model_legend": [(m, series_color(m, i)) for i, m in enumerate(model_keys)],
        "model_keys": model_keys,
        "latency_rows": [
            ("ttft", "Time to first text", data["ttft"]),
            ("duration", "Duration", data["duration"]),
        ],
        "labels": BADGE_LABELS,
        "viewer_rows": [("connections", data["viewers"]["connections"]),
                        ("reconnects", data["viewers"]["reconnects"])],
    })

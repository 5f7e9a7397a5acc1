"""Analytics: one row per logical request, however many viewers, reconnects, resubmits or segments."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from responses_app import services
from responses_app.models import ResponseRequest, Segment
from responses_app.ops import analytics

pytestmark = pytest.mark.django_db

DAY = date(2026, 3, 10)
PERIOD = analytics.DateRange(DAY, DAY + timedelta(days=1))


def at(day: date, hour: int = 12, ms: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC) + timedelta(milliseconds=ms)


@pytest.fixture
def user(db: Any) -> Any:
    return get_user_model().objects.create_user("someone", password="pw")


def make(user: Any, *, created: datetime, status: str = "completed", model: str = "sim-text",
         ttft_ms: int | None = 100, duration_ms: int | None = 1000, usage: dict[str, Any] | None = None,
         key: str | None = None, **counters: int) -> ResponseRequest:
    request, _ = services.request_create(owner=user, input="Hi", model=model,
                                         client_request_id=key or str(uuid.uuid4()))
    ResponseRequest.objects.filter(pk=request.pk).update(
        created=created, status=status, duration_ms=duration_ms, usage=usage,
        first_text_at=created + timedelta(milliseconds=ttft_ms) if ttft_ms is not None else None, **counters)
    return ResponseRequest.objects.get(pk=request.pk)


def test_one_request_counts_once_despite_viewers_reconnects_and_segments(user: Any) -> None:
    request = make(user, created=at(DAY), viewer_connections=3, reconnects=2,
                   usage={"input_tokens": 10, "output_tokens": 20, "total_tokens": 30,
                          "output_tokens_details": {"reasoning_tokens": 5}})
    Segment.objects.create(request=request, index=0, kind="initial", outcome="dropped")
    Segment.objects.create(request=request, index=1, kind="resume", outcome="completed")
    # a resubmit with the same idempotency key is the same logical request
    again, created = services.request_create(owner=user, input="Hi", model="sim-text",
                                             client_request_id=request.client_request_id)
    assert not created and again.pk == request.pk

    data = analytics.summary(PERIOD)
    assert data["total"] == 1
    assert data["by_status"] == [("completed", 1)]
    assert data["by_model"] == [("sim-text", 1)]
    assert data["status_days"] == [{"day": DAY, "counts": {"completed": 1}, "total": 1}]
    assert data["viewers"] == {"connections": 3, "reconnects": 2, "first_connections": 1}
    assert data["tokens"] == {"input_tokens": 10, "output_tokens": 20, "reasoning_tokens": 5, "total_tokens": 30,
                              "requests": 1, "estimated": 0}
    assert data["ttft"]["count"] == 1 and data["duration"]["count"] == 1


def test_per_day_by_status_and_model_within_the_range(user: Any) -> None:
    make(user, created=at(DAY, 1), status="completed", model="sim-text")
    make(user, created=at(DAY, 2), status="failed", model="sim-failed")
    make(user, created=at(DAY + timedelta(days=1), 3), status="completed", model="sim-long")
    make(user, created=at(DAY - timedelta(days=1), 23), status="cancelled")  # before the range
    period = analytics.DateRange(DAY, DAY + timedelta(days=2))
    by_status = analytics.per_day(period, "status")
    assert [d["counts"] for d in by_status] == [{"completed": 1, "failed": 1}, {"completed": 1}]
    by_model = analytics.per_day(period, "model")
    assert [d["counts"] for d in by_model] == [{"sim-text": 1, "sim-failed": 1}, {"sim-long": 1}]
    assert dict(analytics.totals_by(period, "status")) == {"completed": 2, "failed": 1}


def test_percentiles_of_time_to_first_text_and_duration(user: Any) -> None:
    for i in range(1, 101):
        make(user, created=at(DAY), ttft_ms=i * 10, duration_ms=i * 100)
    make(user, created=at(DAY), ttft_ms=None, duration_ms=None, status="streaming")  # no samples from it
    data = analytics.summary(PERIOD)
    assert data["ttft"] == {"p50": 500.0, "p90": 900.0, "p99": 990.0, "count": 100}
    assert data["duration"] == {"p50": 5000.0, "p90": 9000.0, "p99": 9900.0, "count": 100}
    assert analytics.percentile([], 50) is None
    assert analytics.percentile([7.0], 99) == 7.0


def test_tokens_come_only_from_terminal_usage(user: Any) -> None:
    make(user, created=at(DAY), usage={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3})
    make(user, created=at(DAY), usage=None, status="streaming")  # still streaming: nothing to count
    make(user, created=at(DAY), usage={"input_tokens": 4, "output_tokens": 5, "total_tokens": 9})
    assert analytics.token_usage(PERIOD)["total_tokens"] == 12


def test_a_stopped_answer_counts_its_estimated_output_and_says_so(user: Any) -> None:
    make(user, created=at(DAY), usage={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3})
    make(user, created=at(DAY), status="cancelled",
         usage={"output_tokens": 7, "total_tokens": 7, "estimated": True})
    tokens = analytics.token_usage(PERIOD)
    assert (tokens["output_tokens"], tokens["total_tokens"], tokens["estimated"]) == (9, 10, 1)
    today = datetime.now(UTC).date()
    make(user, created=at(today, 0), status="cancelled", usage={"output_tokens": 7, "total_tokens": 7,
                                                                 "estimated": True})
    client = Client()
    client.force_login(get_user_model().objects.create_user("boss", password="pw", is_staff=True))
    html = client.get(reverse("responses_app:analytics"), {"days": "7"}).content.decode()
    assert "output of 1 stopped answer estimated" in html


def test_analytics_page_for_staff_shows_counts_and_charts(user: Any) -> None:
    today = datetime.now(UTC).date()
    request = make(user, created=at(today, 0), viewer_connections=3, reconnects=2)
    Segment.objects.create(request=request, index=0, kind="initial")
    Segment.objects.create(request=request, index=1, kind="resume")
    staff = get_user_model().objects.create_user("boss", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    html = client.get(reverse("responses_app:analytics"), {"days": "7"}).content.decode()
    assert 'data-stat="requests">1<' in html
    assert 'data-stat="connections">3<' in html and 'data-stat="reconnects">2<' in html
    assert html.count("<svg") >= 4
    assert client.get(reverse("responses_app:analytics"), {"days": "nonsense"}).status_code == 200

    client.force_login(user)
    assert client.get(reverse("responses_app:analytics")).status_code == 403


def verdicts(request: ResponseRequest, n: int, action: str) -> None:
    services.safety_verdicts_record(request_id=request.pk, verdicts=[
        {"kind": "output", "mode": "progressive", "start": 10 * i, "end": 10 * i + 10, "flagged": action != "passed",
         "action": action, "checker": "rules"} for i in range(n)])


def test_blocked_requests_count_once_however_many_verdicts_segments_and_tabs(user: Any) -> None:
    cut = make(user, created=at(DAY, 9), status="incomplete", incomplete_reason="content_filter",
               viewer_connections=2, reconnects=1)
    verdicts(cut, 4, "passed")
    verdicts(cut, 2, "retracted")
    Segment.objects.create(request=cut, index=0, kind="initial", outcome="dropped")
    Segment.objects.create(request=cut, index=1, kind="resume", outcome="incomplete")
    flagged = make(user, created=at(DAY, 10), status="failed", error_code="input_flagged", ttft_ms=None)
    services.safety_verdicts_record(request_id=flagged.pk, verdicts=[
        {"kind": "input", "mode": "precheck", "flagged": True, "action": "input_blocked", "checker": "rules"}])
    verdicts(make(user, created=at(DAY, 11)), 5, "passed")  # checked and passed: not blocked
    make(user, created=at(DAY, 12), status="incomplete", incomplete_reason="max_output_tokens")
    make(user, created=at(DAY, 13), status="failed", error_code="server_error")
    make(user, created=at(DAY + timedelta(days=1)), status="incomplete", incomplete_reason="content_filter")

    assert analytics.summary(PERIOD)["safety"] == {"total": 2, "content_filter": 1, "input_flagged": 1}
    assert analytics.summary(analytics.DateRange(DAY, DAY + timedelta(days=2)))["safety"]["content_filter"] == 2


def test_the_analytics_page_shows_the_blocked_requests(user: Any) -> None:
    today = datetime.now(UTC).date()
    verdicts(make(user, created=at(today, 0), status="incomplete", incomplete_reason="content_filter"), 3, "withheld")
    staff = get_user_model().objects.create_user("boss", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    html = client.get(reverse("responses_app:analytics"), {"days": "7"}).content.decode()
    assert 'data-stat="safety-blocked">1<' in html and "1 answer cut · 0 inputs not sent" in html


def test_time_to_first_text_stops_its_clock_while_a_person_is_asked(user: Any) -> None:
    """Asked at 2 s (the end of the response that asks), answered at 60 s, text at 61 s: 3 s."""
    from responses_app.models import McpApproval

    start = at(DAY)
    asked = make(user, created=start, ttft_ms=61_000)
    Segment.objects.create(request=asked, index=0, kind="initial", outcome="completed",
                           started_at=start, ended_at=start + timedelta(seconds=2))
    Segment.objects.create(request=asked, index=1, kind="continuation", outcome="completed",
                           started_at=start + timedelta(seconds=60), ended_at=start + timedelta(seconds=62))
    for n, seconds in enumerate((30, 60)):  # two approvals of one round: the wait ends with the last
        McpApproval.objects.create(request=asked, approval_request_id=f"mcpr_{n}", approve=True, decided_by=user,
                                   decided_at=start + timedelta(seconds=seconds))
    plain = make(user, created=start, ttft_ms=500)
    Segment.objects.create(request=plain, index=0, kind="initial", outcome="completed",
                           started_at=start, ended_at=start + timedelta(seconds=1))
    late = make(user, created=start, ttft_ms=1_000)  # text before it asked: nothing to take away
    Segment.objects.create(request=late, index=0, kind="initial", outcome="completed",
                           started_at=start, ended_at=start + timedelta(seconds=2))
    McpApproval.objects.create(request=late, approval_request_id="mcpr_9", approve=False, decided_by=user,
                               decided_at=start + timedelta(seconds=40))
    assert sorted(analytics.time_to_first_text_ms(PERIOD)) == [500.0, 1_000.0, 3_000.0]


def test_every_model_gets_a_colour_of_its_own() -> None:
    from responses_app.web.charts import PALETTE, series_color
    from responses_app.web.pages import FALLBACK_MODELS

    colours = [series_color(model, i) for i, model in enumerate(FALLBACK_MODELS + ["a", "b", "c", "d", "e", "f"])]
    assert len(set(colours)) == len(colours) == len(FALLBACK_MODELS) + 6
    assert series_color("failed", 3) == PALETTE["failed"] != series_color("error", 3)

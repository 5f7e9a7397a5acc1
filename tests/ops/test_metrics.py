"""GET /metrics: who may read it (loopback only by default, never a proxied request; a bearer token
when RELAY_METRICS_TOKEN is set), what it says, and the call sites that are not the runner's."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.sessions.models import Session
from django.test import Client

from responses_app.ops import metrics
from tests.metrics_helpers import parse, total, value

pytestmark = pytest.mark.django_db

TOKEN = "a-long-metrics-token-0123456789"


def scrape(client: Client | None = None, **extra: Any) -> Any:
    return (client or Client()).get("/metrics", **extra)


def test_loopback_client_reads_the_text_format() -> None:
    response = scrape()  # the test client's REMOTE_ADDR is 127.0.0.1
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    assert response["Cache-Control"] == "no-store"
    text = response.content.decode()
    for name, kind in [("relay_requests_total", "counter"), ("relay_time_to_first_token_seconds", "histogram"),
                       ("relay_patch_lag_seconds", "histogram"), ("relay_streams_in_flight", "gauge"),
                       ("relay_event_loop_lag_seconds", "gauge"), ("relay_viewer_resyncs_total", "counter")]:
        assert f"# TYPE {name.removesuffix('_total')} {kind}" in text or f"# TYPE {name} {kind}" in text, name
    assert not response.cookies and not Session.objects.exists(), "no session, no login"


def test_ipv6_loopback_is_loopback() -> None:
    assert scrape(REMOTE_ADDR="::1").status_code == 200


@pytest.mark.parametrize("address", ["203.0.113.7", "10.0.0.2", "::ffff:198.51.100.1", ""])
def test_other_clients_are_refused_without_a_token(address: str) -> None:
    response = scrape(REMOTE_ADDR=address)
    assert response.status_code == 403
    assert b"RELAY_METRICS_TOKEN" in response.content and b"relay_" not in response.content


@pytest.mark.parametrize("header", ["HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO", "HTTP_X_REAL_IP",
                                    "HTTP_FORWARDED"])
def test_a_proxied_request_never_passes_as_loopback(header: str) -> None:
    # nginx on the same machine connects from 127.0.0.1; Daphne's --proxy-headers would take a
    # forged X-Forwarded-For: 127.0.0.1 as the client. Either way a forwarding header is there.
    assert scrape(REMOTE_ADDR="127.0.0.1", **{header: "127.0.0.1"}).status_code == 403


def test_with_a_token_only_its_bearer_is_served(settings: Any) -> None:
    settings.RELAY_METRICS_TOKEN = TOKEN
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}, {"HTTP_AUTHORIZATION": TOKEN},
                    {"HTTP_AUTHORIZATION": f"Basic {TOKEN}"}, {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}x"}):
        response = scrape(**headers)  # loopback, yet refused: the token is the rule now
        assert response.status_code == 401, headers
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert b"relay_" not in response.content
    good = scrape(REMOTE_ADDR="203.0.113.7", HTTP_X_FORWARDED_FOR="198.51.100.1",
                  HTTP_AUTHORIZATION=f"bearer {TOKEN}")
    assert good.status_code == 200 and b"relay_requests" in good.content


def test_only_safe_methods() -> None:
    assert Client().post("/metrics").status_code == 405


def test_safety_verdicts_are_counted_by_mode_and_result() -> None:
    before = parse(scrape().content.decode())
    metrics.safety_verdict("block", "flagged")
    metrics.safety_verdict("block", "flagged")
    metrics.safety_verdict("monitor", "passed")
    metrics.safety_verdict("monitor", "error")
    after = parse(scrape().content.decode())
    for mode, result, n in [("block", "flagged", 2), ("monitor", "passed", 1), ("monitor", "error", 1),
                            ("block", "passed", 0)]:
        name = "relay_safety_verdicts_total"
        assert value(after, name, mode=mode, result=result) - value(before, name, mode=mode, result=result) == n


@pytest.mark.parametrize(("mode", "result"), [("block", "maybe"), ("", "passed"), ("m" * 33, "passed")])
def test_a_bad_safety_verdict_is_a_clear_error_and_counts_nothing(mode: str, result: str) -> None:
    before = total(parse(scrape().content.decode()), "relay_safety_verdicts_total")
    with pytest.raises(ValueError, match="safety"):
        metrics.safety_verdict(mode, result)
    assert total(parse(scrape().content.decode()), "relay_safety_verdicts_total") == before


def test_model_labels_are_bounded(settings: Any) -> None:
    settings.RELAY_ALLOWED_MODELS = []
    settings.RELAY_UPSTREAM_BASE_URL = ""
    assert metrics.model_label("sim-text") == "sim-text"
    assert metrics.model_label("anything a user typed") == "other"
    settings.RELAY_UPSTREAM_BASE_URL = "https://provider.example/v1"
    assert metrics.model_label("sim-text") == "other", "a provider's models are only the allowed ones"
    settings.RELAY_ALLOWED_MODELS = ["gpt-4.1-mini"]
    assert metrics.model_label("gpt-4.1-mini") == "gpt-4.1-mini"
    assert metrics.model_label("gpt-5") == "other"


def test_a_stop_before_the_runner_started_counts_the_request_and_its_cancel_once(django_user_model: Any) -> None:
    from responses_app import services

    owner = django_user_model.objects.create_user("stopper", password="pw")
    request, _ = services.request_create(owner=owner, input="hi", model="sim-text", client_request_id="stop-1")
    before = parse(scrape().content.decode())
    assert services.request_cancel(request=request)  # pending: cancelled at once
    assert not services.request_cancel(request=request)  # pressed again: counted neither way
    after = parse(scrape().content.decode())
    name = "relay_requests_total"
    assert value(after, name, status="cancelled", model="sim-text") - value(
        before, name, status="cancelled", model="sim-text") == 1
    assert total(after, "relay_cancels_total") - total(before, "relay_cancels_total") == 1
    request.refresh_from_db()
    assert request.status == "cancelled" and request.cancels == 1


def test_a_short_token_is_refused_by_the_deployment_checks() -> None:
    import os
    import subprocess
    import sys

    from tests.host.test_security_production import ROOT

    env = {**os.environ, "DJANGO_ENV": "test", "SECRET_KEY": "k" * 50, "ALLOWED_HOSTS": "relay.test",
           "OPENAI_BASE_URL": "https://provider.example/v1", "RELAY_ALLOWED_MODELS": "gpt-4.1",
           "RELAY_METRICS_TOKEN": "short"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--tag", "responses_app"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    refused = check()
    assert refused.returncode != 0 and "responses_app.E012" in refused.stderr, refused.stderr
    env["RELAY_METRICS_TOKEN"] = TOKEN
    passed = check()
    assert passed.returncode == 0, passed.stderr


def test_never_redirected_to_https(settings: Any) -> None:
    settings.SECURE_SSL_REDIRECT = True  # as in production: a scrape of a process's own port is plain HTTP
    assert scrape().status_code == 200
    assert Client().get("/accounts/login/").status_code == 301, "other pages still are"


def test_every_stored_safety_verdict_is_counted_by_mode_and_result(django_user_model: Any) -> None:
    from responses_app import services

    owner = django_user_model.objects.create_user("judged", password="pw")
    request, _ = services.request_create(owner=owner, input="hi", model="sim-text", client_request_id="judged-1")
    before = parse(scrape().content.decode())
    row = {"kind": "output", "mode": "buffered", "text": "x", "checker": "rules", "action": "passed"}
    services.safety_verdicts_record(request_id=request.pk, verdicts=[
        dict(row, flagged=False), dict(row, flagged=True, action="withheld"),
        dict(row, flagged=True, action="withheld", error="timeout after 2 s")])
    after = parse(scrape().content.decode())
    name = "relay_safety_verdicts_total"
    for result in ("passed", "flagged", "error"):
        assert value(after, name, mode="buffered", result=result) - value(
            before, name, mode="buffered", result=result) == 1, result

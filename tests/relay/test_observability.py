"""Every log line of a request names it and its response; the optional OpenTelemetry span of a
request follows the GenAI conventions (the SDK's in-memory exporter), and is off by default."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from responses_app.conf import app_settings
from responses_app.ops import logcontext, tracing
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.upstream.http import Upstream
from tests.relay.helpers import make_request, reload
from tests.relay.test_runner_faults import fixture_events, mock_upstream, run_runner, run_to_end

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def test_every_line_logged_for_a_request_names_it_and_its_response(owner: Any, caplog: Any,
                                                                         settings: Any) -> None:
    # A stream that stalls past the idle timeout (found by the lease keeper, every 2 s) logs, then
    # is resumed and completes.
    settings.RELAY_IDLE_TIMEOUT_S = 1
    caplog.set_level(logging.INFO, logger="responses_app")
    saved, _ = await run_to_end(owner, "sim-text", {"sim.stall_at": "10", "sim.stall_ms": "5000"})
    assert saved.status == "completed" and saved.response_id
    mine = [r for r in caplog.records if r.name.startswith("responses_app")]
    assert any("silent" in r.getMessage() for r in mine), [r.getMessage() for r in mine]
    for record in mine:
        if str(saved.pk) in record.getMessage():
            assert record.request_id == str(saved.pk), record.getMessage()
            assert record.response_id == saved.response_id, record.getMessage()


async def test_a_request_that_fails_before_any_response_logs_its_id_and_no_response(owner: Any,
                                                                                    caplog: Any) -> None:
    request = await make_request(owner, "sim-text")

    def broken(_request: httpx.Request) -> httpx.Response:
        raise RuntimeError("a bug in the relay")  # not a connection failure: the runner logs it

    caplog.set_level(logging.INFO, logger="responses_app")
    runner = StreamRunner(str(request.pk), get_hub(), upstream_factory=lambda: Upstream(
        base="http://upstream.test/v1", api_key="", transport=httpx.MockTransport(broken)))
    await runner.run()
    assert (await reload(request)).status == "error"
    failures = [r for r in caplog.records if "failed" in r.getMessage() and r.name.startswith("responses_app")]
    assert failures and all(r.request_id == str(request.pk) and r.response_id == "-" for r in failures)


def test_lines_outside_a_request_say_so_and_the_console_format_shows_both(caplog: Any) -> None:
    logger = logging.getLogger("responses_app.test")
    caplog.set_level(logging.INFO, logger="responses_app")
    logger.info("outside")
    assert (caplog.records[-1].request_id, caplog.records[-1].response_id) == ("-", "-")
    from django.conf import settings

    assert "%(request_id)s" in settings.LOGGING["formatters"]["relay"]["format"]
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    assert logcontext.RequestContextFilter().filter(record) and record.request_id == "-"


@pytest.fixture
def spans(settings: Any, monkeypatch: Any) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_provider", provider)
    settings.RELAY_OTEL = True
    return exporter


async def test_a_span_per_request_with_the_gen_ai_attributes(owner: Any, spans: InMemorySpanExporter) -> None:
    saved, _ = await run_to_end(owner, "sim-text", {})
    assert saved.status == "completed"
    (span,) = spans.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert span.name == "chat sim-text"
    assert attributes["gen_ai.operation.name"] == "chat" and attributes["gen_ai.request.model"] == "sim-text"
    assert attributes["gen_ai.system"] == "simulator"
    assert attributes["gen_ai.response.id"] == saved.response_id
    assert attributes["gen_ai.usage.input_tokens"] == saved.usage["input_tokens"]
    assert attributes["gen_ai.usage.output_tokens"] == saved.usage["output_tokens"]
    assert attributes["gen_ai.response.finish_reasons"] == ("completed",)
    assert attributes["relay.request_id"] == str(saved.pk) and attributes["relay.takeover"] is False
    first_chunk = attributes["gen_ai.response.time_to_first_chunk"]
    first_token = attributes["gen_ai.response.time_to_first_token"]
    assert isinstance(first_chunk, float) and 0 <= first_chunk <= first_token
    assert [e.name for e in span.events] == ["gen_ai.first_chunk", "gen_ai.first_token"]
    assert span.status.status_code is not StatusCode.ERROR


async def test_a_failed_request_s_span_is_an_error(owner: Any, spans: InMemorySpanExporter) -> None:
    blocks = fixture_events("sim-text.sse")[:8]
    saved, _ = await run_runner(owner, mock_upstream(blocks, httpx.Response(503, json={"error": {}})))
    assert saved.status == "unknown"
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["relay.status"] == "unknown"


async def test_off_by_default(owner: Any, settings: Any) -> None:
    assert app_settings.OTEL is False
    assert tracing.start(request_id="x", model="sim-text") is tracing.NO_SPAN


async def test_the_sweep_s_lines_about_a_request_name_it(owner: Any, caplog: Any) -> None:
    from datetime import timedelta

    from asgiref.sync import sync_to_async
    from django.utils import timezone

    from responses_app.models import ResponseRequest
    from responses_app.relay import worker

    request = await make_request(owner, "sim-text")
    await sync_to_async(ResponseRequest.objects.filter(pk=request.pk).update)(
        created=timezone.now() - timedelta(minutes=5))  # nobody started it
    caplog.set_level(logging.INFO, logger="responses_app")
    assert await worker.sweep() == 1
    (line,) = [r for r in caplog.records if "never started" in r.getMessage()]
    assert line.request_id == str(request.pk) and line.response_id == "-"

"""Optional OpenTelemetry spans: one per runner of a logical request, after the GenAI semantic
conventions (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/).

Off unless RELAY_OTEL=true (settings refuse it without the opentelemetry-api package); then the
spans go to the process's tracer provider, which the SDK sets up (e.g. `opentelemetry-instrument`
reads the standard OTEL_* variables: exporter, endpoint, service name). Off, every call is a
no-op method on `NO_SPAN`.

A span is `chat {model}` (kind CLIENT) with gen_ai.operation.name, gen_ai.system /
gen_ai.provider.name, gen_ai.request.model; gen_ai.response.id, gen_ai.usage.input_tokens /
output_tokens and gen_ai.response.finish_reasons when it ends; an event at the first chunk
(response.created) and at the first token, with the seconds to each as attributes. A request taken
over by another runner has a second span (relay.takeover=true).

May import: Django settings, opentelemetry (lazily); nothing of the relay.
"""

from __future__ import annotations

import time
from typing import Any

from ..conf import app_settings
from ..streaming import vocabulary as v

_provider: Any = None  # a TracerProvider of its own (tests); None: the global one
_FAILED = frozenset({v.FAILED, v.ERROR, v.UNKNOWN})


class RequestSpan:
    """The no-op span: what the runner calls when tracing is off."""

    def response_created(self, response_id: str) -> None:
        pass

    def first_token(self) -> None:
        pass

    def end(self, *, status: str, response_id: str, usage: Any, error_code: str = "") -> None:
        pass

    def close(self) -> None:
        """The runner stopped: a span it did not end (taken over, shut down) ends now."""


NO_SPAN = RequestSpan()


class _OtelSpan(RequestSpan):
    def __init__(self, span: Any) -> None:
        self.span = span
        self.started = time.monotonic()
        self.first_chunk_seen = self.first_token_seen = self.ended = False

    def response_created(self, response_id: str) -> None:
        self.span.set_attribute("gen_ai.response.id", response_id)
        if not self.first_chunk_seen:
            self.first_chunk_seen = True
            seconds = time.monotonic() - self.started
            self.span.set_attribute("gen_ai.response.time_to_first_chunk", seconds)
            self.span.add_event("gen_ai.first_chunk", {"gen_ai.response.time_to_first_chunk": seconds})

    def first_token(self) -> None:
        if not self.first_token_seen:
            self.first_token_seen = True
            seconds = time.monotonic() - self.started
            self.span.set_attribute("gen_ai.response.time_to_first_token", seconds)
            self.span.add_event("gen_ai.first_token", {"gen_ai.response.time_to_first_token": seconds})

    def end(self, *, status: str, response_id: str, usage: Any, error_code: str = "") -> None:
        from opentelemetry.trace import Status, StatusCode

        span = self.span
        if response_id:
            span.set_attribute("gen_ai.response.id", response_id)
        span.set_attribute("gen_ai.response.finish_reasons", [status])
        self.ended = True
        span.set_attribute("relay.status", status)
        if isinstance(usage, dict):
            for ours, theirs in (("input_tokens", "gen_ai.usage.input_tokens"),
                                 ("output_tokens", "gen_ai.usage.output_tokens")):
                if isinstance(usage.get(ours), int):
                    span.set_attribute(theirs, usage[ours])
        if status in _FAILED:
            if error_code:
                span.set_attribute("error.type", error_code)
            span.set_status(Status(StatusCode.ERROR, error_code or status))
        span.end()

    def close(self) -> None:
        if not self.ended:
            self.ended = True
            self.span.set_attribute("relay.status", "stopped")  # the request goes on elsewhere, or later
            self.span.end()


def start(*, request_id: str, model: str, takeover: bool = False) -> RequestSpan:
    """A span for one runner of a logical request, or NO_SPAN when tracing is off."""
    if not app_settings.OTEL:
        return NO_SPAN
    from opentelemetry import trace

    provider = "simulator" if app_settings.upstream_is_simulator else "openai"
    span = trace.get_tracer("responses_app.relay", tracer_provider=_provider).start_span(
        f"chat {model}", kind=trace.SpanKind.CLIENT, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.system": provider, "gen_ai.provider.name": provider,
            "gen_ai.request.model": model, "relay.request_id": request_id, "relay.takeover": takeover,
        })
    return _OtelSpan(span)

"""Operations: metrics (Prometheus, `GET /metrics`), analytics (the staff page's queries), tracing
(OpenTelemetry spans), logcontext (the request on every log line) and health (`GET /healthz`).

Beside the models and services in the order of packages: services count what they write, analytics
reads the models. Never the relay or an edge."""

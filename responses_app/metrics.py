"""The public name of `GET /metrics` (docs/metrics.md): `include("responses_app.metrics")`.

Every metric and the view are in responses_app/ops/metrics.py."""

from .ops.metrics import urlpatterns

__all__ = ["urlpatterns"]

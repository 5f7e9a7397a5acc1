"""The public name of `GET /healthz` (docs/production.md): `include("responses_app.health")`.

The probe itself is responses_app/ops/health.py."""

from .ops.health import urlpatterns

__all__ = ["urlpatterns"]

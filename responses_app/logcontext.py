"""The public name of the log filter (docs/metrics.md): `responses_app.logcontext.RequestContextFilter`.

What it adds to every record is in responses_app/ops/logcontext.py."""

from .ops.logcontext import RequestContextFilter

__all__ = ["RequestContextFilter"]

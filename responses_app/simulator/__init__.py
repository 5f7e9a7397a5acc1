"""A Responses API simulator speaking the real wire format, with fault injection. Pure ASGI."""

from __future__ import annotations

from .app import SimulatorApp, create_app

__all__ = ["SimulatorApp", "create_app"]

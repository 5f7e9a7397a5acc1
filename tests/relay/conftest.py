"""Fixtures of the relay's tests that send requests upstream for real."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def full_context_bodies(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every body the runner builds from a branch's turns (`full_context_body`), in order, as it
    sent them: what the upstream was asked when nothing could be chained to."""
    from responses_app.relay import stream_runner as runner_module

    sent: list[dict[str, Any]] = []
    real = runner_module.full_context_body

    def recording(request: Any, context: list[dict[str, Any]]) -> dict[str, Any]:
        body = real(request, context)
        sent.append(body)
        return body

    monkeypatch.setattr(runner_module, "full_context_body", recording)
    return sent

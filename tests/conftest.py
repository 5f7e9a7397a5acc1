"""Shared fixtures. Real-stream captures are read from ../shared and skipped cleanly without it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["tests.servers"]

ROOT = Path(__file__).resolve().parent.parent
REAL_STREAMS = ROOT.parent / "shared" / "real-streams"
IN_CI = os.environ.get("CI", "").lower() == "true"


def real_stream_files() -> list[Path]:
    if not REAL_STREAMS.is_dir():
        return []
    return sorted(REAL_STREAMS.glob("*.sse"))


def require_real_streams() -> None:
    if not REAL_STREAMS.is_dir():
        if IN_CI:
            pytest.fail(f"CI must have the real-stream captures at {REAL_STREAMS}")
        pytest.skip("../shared/real-streams is absent on this machine")


@pytest.fixture
def relay_settings(settings: Any, simulator_url: str) -> Any:
    """Point the relay at the standalone simulator over real loopback HTTP."""
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""
    settings.SIMULATOR_BASE_URL = simulator_url
    settings.RELAY_FLUSH_INTERVAL_MS = 20
    settings.RELAY_CHECKPOINT_INTERVAL_MS = 100
    return settings

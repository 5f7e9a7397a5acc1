from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model


@pytest.fixture
def relay_settings(settings: Any, simulator_url: str) -> Any:
    """Point the relay at the standalone simulator over real loopback HTTP."""
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""
    settings.SIMULATOR_BASE_URL = simulator_url
    settings.RELAY_FLUSH_INTERVAL_MS = 20
    settings.RELAY_CHECKPOINT_INTERVAL_MS = 100
    return settings


@pytest.fixture
def owner(db: Any) -> Any:
    return get_user_model().objects.create_user("owner", password="pw")


@pytest.fixture
def outsider(db: Any) -> Any:
    return get_user_model().objects.create_user("outsider", password="pw")


@pytest.fixture
def staff(db: Any) -> Any:
    return get_user_model().objects.create_user("staff", password="pw", is_staff=True)

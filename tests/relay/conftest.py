from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model


@pytest.fixture
def owner(db: Any) -> Any:
    return get_user_model().objects.create_user("owner", password="pw")


@pytest.fixture
def outsider(db: Any) -> Any:
    return get_user_model().objects.create_user("outsider", password="pw")


@pytest.fixture
def staff(db: Any) -> Any:
    return get_user_model().objects.create_user("staff", password="pw", is_staff=True)

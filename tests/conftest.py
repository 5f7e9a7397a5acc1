"""Shared fixtures: users by role, the relay pointed at the simulator. Real-stream captures are read
from ../shared and skipped cleanly without it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

pytest_plugins = ["tests.servers"]

ROOT = Path(__file__).resolve().parent.parent


def _real_streams() -> Path:
    """../shared/real-streams beside the checkout, or beside a parent of it (a git worktree)."""
    for parent in ROOT.parents:
        found = parent / "shared" / "real-streams"
        if found.is_dir():
            return found
    return ROOT.parent / "shared" / "real-streams"


REAL_STREAMS = _real_streams()
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


def relay_check_errors() -> list[Any]:
    """What `manage.py check` reports of the app's settings, in this process."""
    from django.core import checks

    return [m for m in checks.run_checks(tags=["responses_app"]) if m.is_serious()]


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashes(django_test_environment: None) -> Any:
    """MD5 for the passwords tests make (Django's advice for tests): a PBKDF2 hash costs 0.36 s of
    CPU, and most tests make a user or two. Servers started as processes keep the real hasher."""
    from django.test.utils import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture
def relay_settings(settings: Any, simulator_url: str) -> Any:
    """Point the relay at the standalone simulator over real loopback HTTP."""
    settings.RELAY_UPSTREAM_BASE_URL = ""
    settings.RELAY_UPSTREAM_API_KEY = ""
    settings.RELAY_SIMULATOR_BASE_URL = simulator_url
    settings.RELAY_FLUSH_INTERVAL_MS = 20
    settings.RELAY_CHECKPOINT_INTERVAL_MS = 100
    return settings


@pytest.fixture
def owner(db: Any) -> Any:
    return get_user_model().objects.create_user("owner", password="pw")


@pytest.fixture
def teammate(db: Any) -> Any:
    return get_user_model().objects.create_user("teammate", password="pw")


@pytest.fixture
def outsider(db: Any) -> Any:
    return get_user_model().objects.create_user("outsider", password="pw")


@pytest.fixture
def staff(db: Any) -> Any:
    """An auditor: staff who may read every request (view_responserequest), not stop one."""
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_responserequest"))
    return get_user_model().objects.get(pk=user.pk)  # a fresh instance: permissions are cached per instance


@pytest.fixture
def no_upstream(settings: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No runner is started and no upstream is reached: starts and cancels are recorded instead
    (a cancel as `cancel:<id>`)."""
    from django.core.cache import cache

    settings.RELAY_UPSTREAM_BASE_URL = ""
    settings.RELAY_UPSTREAM_API_KEY = ""
    settings.RELAY_SIMULATOR_BASE_URL = "http://127.0.0.1:9/simulator/v1"  # nothing listens: the fallback list
    cache.clear()
    started: list[str] = []

    async def fake_start(request_id: str) -> None:
        started.append(request_id)

    async def fake_cancel(request_id: str) -> None:
        started.append(f"cancel:{request_id}")

    monkeypatch.setattr("responses_app.relay.worker.start_request", fake_start)
    monkeypatch.setattr("responses_app.relay.worker.cancel_request", fake_cancel)  # every Stop: submission.stop
    return started


@pytest.fixture(scope="session", autouse=True)
def _close_relay_db_threads(request: Any, django_db_blocker: Any) -> Any:
    """The runner's database threads keep connections open; close them before the test database
    is dropped (PostgreSQL refuses to drop a database in use)."""
    request.getfixturevalue("django_db_setup")
    yield
    from django.db import connection

    from responses_app.relay.dbthreads import close_db_threads

    close_db_threads()
    if connection.vendor == "postgresql":  # and any other thread's (asgiref's sync thread)
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None,
                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    """On SQLite the test database is a file, as a deployment's is. Django's default for tests, an
    in-memory database with a shared cache, answers a write that meets the runner's with "database
    table is locked" at once instead of waiting the configured timeout, as a file's lock does."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        database.setdefault("TEST", {})["NAME"] = str(tmp_path_factory.mktemp("sqlite") / "test.sqlite3")

"""Browser fixtures: the real server (project.serve: uvicorn, project.asgi) in a subprocess against a file SQLite
database in a temp dir, with the simulator mounted on the same server; Debian's Chromium through
Playwright's sync API. Skipped without /usr/bin/chromium, unless CI=true (then it fails)."""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers import migrate, stop

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
IN_CI = os.environ.get("CI", "").lower() == "true"
USERS = {"alice": False, "bob": False, "boss": True}  # username -> is_staff; password "pw"
PASSWORD = "pw"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


def require_chromium() -> None:
    if not CHROMIUM.exists():
        if IN_CI:
            pytest.fail(f"CI must have Chromium at {CHROMIUM}")
        pytest.skip(f"{CHROMIUM} is absent on this machine")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RelayServer:
    url: str
    db_path: Path
    log_path: Path

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the server's database directly: an oracle the pages cannot fake."""
        with sqlite3.connect(self.db_path, timeout=20) as db:
            return db.execute(sql, params).fetchall()

    def request_row(self, request_id: str) -> dict[str, Any]:
        rows = self.query("SELECT status, final_text, viewer_connections, reconnects "
                          "FROM responses_app_responserequest WHERE id = ?", request_id.replace("-", ""))
        assert rows, f"no request {request_id}"
        status, final_text, connections, reconnects = rows[0]
        return {"status": status, "final_text": final_text, "viewer_connections": connections,
                "reconnects": reconnects}

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True,
                   text=True, timeout=120)


@pytest.fixture(scope="session")
def relay_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayServer]:
    with serve(tmp_path_factory.mktemp("relay-server")) as server:
        yield server


@contextlib.contextmanager
def serve(tmp: Path, **extra_env: str) -> Iterator[RelayServer]:
    """A relay server (Daphne) of its own, with `extra_env` on top of the tests' settings."""
    require_chromium()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    db_path = tmp / "db.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db_path}",
        "SIMULATOR_BASE_URL": "",  # the default: the embedded simulator, reached in-process
        "SIMULATOR_ENABLED": "true",
        "OPENAI_BASE_URL": "",
        "OPENAI_API_KEY": "",
        "DJANGO_ENV": "development",
        "DEBUG": "true",
        # these tests submit faster than one person types: the limits have tests of their own
        "RELAY_MAX_CONCURRENT_PER_USER": "50",
        "RELAY_SUBMIT_RATE": "1000/m",  # static files are served by project/urls.py under DEBUG
        "REDIS_URL": "",
        "PYTHONUNBUFFERED": "1",
        **extra_env,
    }
    migrate(env)
    creation = "; ".join(
        f"User.objects.create_user({name!r}, password={PASSWORD!r}, is_staff={staff})" for name, staff in USERS.items())
    _manage(env, "shell", "-c", f"from django.contrib.auth import get_user_model; User = get_user_model(); {creation}")
    log_path = tmp / "server.log"
    log = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "project.serve", "--port", str(port)],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = RelayServer(url=url, db_path=db_path, log_path=log_path)
    try:
        deadline = time.monotonic() + 30
        while True:  # readiness: the login page and the mounted simulator both answer
            try:
                if (httpx.get(f"{url}/accounts/login/", timeout=2).status_code == 200
                        and httpx.get(f"{url}/simulator/v1/models", timeout=2,
                                  headers={"authorization": "Bearer sim-dev-key"}).status_code == 200):
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the relay server did not start:\n{server.log_tail()}")
            time.sleep(0.05)
        yield server
    finally:
        stop(proc)
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Module scope: Playwright's sync API keeps an event loop running in this thread while it is
    # open, which would break every later test that calls asyncio.run().
    require_chromium()
    from playwright.sync_api import expect, sync_playwright

    # An assertion waits as long as an action does: its own 5 s default fails tests on a CI lane
    # whose two cores are shared with two other lanes.
    expect.set_options(timeout=30_000)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


_LOGGED_IN: dict[tuple[Path, str], dict[str, Any]] = {}  # (server database, user) -> its first login's cookies


class Session:
    """A logged-in browser context for one persona. The first on a server logs in through the form;
    the next ones start from its cookies (a login is a page, a PBKDF2 hash and the home page: seconds
    of a CI lane's CPU, in every test)."""

    def __init__(self, browser: Any, server: RelayServer, username: str) -> None:
        self.server = server
        state = _LOGGED_IN.get((server.db_path, username))
        self.context = browser.new_context(base_url=server.url, viewport={"width": 1100, "height": 900},
                                           storage_state=state)
        self.context.set_default_timeout(30_000)
        self.errors: list[str] = []
        if state is not None:
            return
        page = self.page()
        page.goto("/accounts/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{server.url}/")
        page.close()
        _LOGGED_IN[(server.db_path, username)] = {"cookies": self.context.storage_state()["cookies"], "origins": []}

    def page(self) -> Any:
        page = self.context.new_page()
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        return page

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def sessions(browser: Any, relay_server: RelayServer) -> Iterator[Any]:
    yield from open_sessions(browser, relay_server)


def open_sessions(browser: Any, server: RelayServer) -> Iterator[Any]:
    """Logged-in sessions on `server` (a factory by user name); any JavaScript error fails the test."""
    opened: list[Session] = []

    def open_session(username: str) -> Session:
        session = Session(browser, server, username)
        opened.append(session)
        return session

    yield open_session
    errors = [e for s in opened for e in s.errors]
    for session in opened:
        session.close()
    assert not errors, f"JavaScript errors: {errors}"

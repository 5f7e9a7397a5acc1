"""Production settings for real: `check --deploy` clean, unsafe configurations refused at start-up,
and a Daphne server under DJANGO_ENV=production (its upstream the standalone simulator, as a
provider) that redirects to HTTPS, trusts the proxy's X-Forwarded-Proto, sends HSTS and a CSP,
serves collected static files, refuses foreign hosts and has no simulator mounted."""

from __future__ import annotations

import json
import os
import posixpath
import re
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from responses_app.simulator.auth import DEV_API_KEY
from tests.servers import migrate, stop

ROOT = Path(__file__).resolve().parents[2]
HOST = "relay.test"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def manage(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=check,
                          capture_output=True, text=True, timeout=120)


def serve(env: dict[str, str], log_path: Path, ready_path: str = "/accounts/login/",
          headers: dict[str, str] | None = None, port: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """The server (project.serve) on `port` (a free one by default) with `env`; returns once `ready_path` answers
    (any status below 500)."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    log = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "project.serve", "--port", str(port)],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url + ready_path, headers=headers or {}, timeout=2).status_code < 500:
                return proc, url
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)  # type: ignore[arg-type]
            raise RuntimeError(f"the server did not start:\n{log_path.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)


def production_env(tmp: Path, simulator_url: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_ENV": "production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": f"{HOST},127.0.0.1",
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "DJANGO_STATIC_ROOT": str(tmp / "static"),
        "OPENAI_BASE_URL": simulator_url,  # a provider, as far as the relay can tell
        "OPENAI_API_KEY": DEV_API_KEY,
        "RELAY_ALLOWED_MODELS": "sim-text",
        "REDIS_URL": "",
        "SIMULATOR_ENABLED": "",
        "DEBUG": "",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory, simulator_url: str) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("production")
    env = {k: v for k, v in production_env(tmp, simulator_url).items() if v != ""}
    migrate(env)
    manage(env, "collectstatic", "--noinput")
    proc, url = serve(env, tmp / "server.log", headers={"Host": HOST, "X-Forwarded-Proto": "https"})
    try:
        yield {"url": url, "env": env, "log": tmp / "server.log"}
    finally:
        stop(proc)  # type: ignore[arg-type]


def get(prod: dict[str, Any], path: str, *, https: bool = True, host: str = HOST, **headers: str) -> httpx.Response:
    sent = {"Host": host, **({"X-Forwarded-Proto": "https"} if https else {}), **headers}
    return httpx.get(prod["url"] + path, headers=sent, timeout=10)


def test_check_deploy_reports_no_issues(prod: dict[str, Any]) -> None:
    result = manage(prod["env"], "check", "--deploy", "--fail-level", "WARNING", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_plain_http_is_redirected_and_https_gets_hsts_csp_and_secure_cookies(prod: dict[str, Any]) -> None:
    plain = get(prod, "/accounts/login/", https=False)
    assert plain.status_code == 301 and plain.headers["location"] == f"https://{HOST}/accounts/login/"
    page = get(prod, "/accounts/login/")
    assert page.status_code == 200
    assert page.headers["strict-transport-security"] == "max-age=31536000; includeSubDomains; preload"
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "Secure" in page.headers["set-cookie"]
    assert page.headers["x-content-type-options"] == "nosniff"


def test_collected_static_files_are_served(prod: dict[str, Any]) -> None:
    script = get(prod, "/static/responses_app/chat/markdown.js")
    assert script.status_code == 200 and "export function" in script.text
    assert "javascript" in script.headers["content-type"]


def test_every_module_the_chat_page_loads_is_a_hashed_file_of_the_release(prod: dict[str, Any]) -> None:
    """The page links main.<hash>.js; its imports, and theirs, must be hashed names too, or a browser
    mixes a new main module with a cached module of the previous release. temml (the vendored `.mjs`
    math.js imports) too, served as JavaScript."""
    manifest = json.loads((Path(prod["env"]["DJANGO_STATIC_ROOT"]) / "staticfiles.json").read_text())["paths"]
    hashed = set(manifest.values())
    todo, seen = [manifest["responses_app/chat/main.js"]], set()
    while todo:
        name = todo.pop()
        seen.add(name)
        module = get(prod, f"/static/{name}")
        assert module.status_code == 200, name
        assert "javascript" in module.headers["content-type"], name  # a module of another type is refused
        assert "immutable" in module.headers["cache-control"] or "max-age=315360000" in module.headers["cache-control"]
        imported = re.findall(r"""from\s*["'](\./[^"']+)["']""", module.text)
        if not name.startswith("responses_app/vendor/"):  # import("...") in temml's comments is not ours
            imported += re.findall(r"""import\(["'](\.\.?/[^"']+)["']\)""", module.text)  # math.js: temml
        for target in imported:
            path = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
            assert path in hashed, f"{name} imports {target}, not a hashed name"
            if path not in seen:
                todo.append(path)
    plain = {path for path in manifest if path.startswith("responses_app/chat/") and path.endswith(".js")}
    plain.add("responses_app/vendor/temml/temml.mjs")
    assert len(seen) == len(plain), (sorted(seen), sorted(plain))  # every module reached


def test_no_simulator_and_no_foreign_host(prod: dict[str, Any]) -> None:
    auth = {"Authorization": f"Bearer {DEV_API_KEY}"}
    assert get(prod, "/simulator/v1/models", **auth).status_code == 404
    assert get(prod, "/simulator/v1/responses/resp_x/cancel", **auth).status_code == 404
    assert get(prod, "/accounts/login/", host="evil.example").status_code == 400


@pytest.mark.parametrize(("extra", "message"), [
    ({"SIMULATOR_ENABLED": "true"}, "SIMULATOR_ENABLED=true is refused under DJANGO_ENV=production"),
    ({"RELAY_ALLOWED_MODELS": ""}, "responses_app.E011: A real provider and no RELAY_ALLOWED_MODELS"),
    ({"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}, "responses_app.E010: The upstream is the built-in simulator"),
    ({"RELAY_SUBMIT_RATE": "often"}, "responses_app.E002: RELAY_SUBMIT_RATE must look like 20/m"),
    ({"DEBUG": "true"}, "DEBUG=true is refused under DJANGO_ENV=production"),
    ({"SECRET_KEY": ""}, "SECRET_KEY must be set under DJANGO_ENV=production"),
    ({"ALLOWED_HOSTS": ""}, "ALLOWED_HOSTS must be set under DJANGO_ENV=production"),
    ({"DJANGO_ENV": "test", "SECRET_KEY": ""}, "SECRET_KEY must be set under DJANGO_ENV=test"),
])
def test_unsafe_configurations_refuse_to_start(tmp_path: Path, extra: dict[str, str], message: str) -> None:
    env = {k: v for k, v in {**production_env(tmp_path, "http://127.0.0.1:9/v1"), **extra}.items() if v}
    result = subprocess.run([sys.executable, "-m", "project.serve", "--port", str(free_port())],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert message in result.stderr


def test_only_development_is_development() -> None:
    env = {**os.environ, "DJANGO_ENV": "test", "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": HOST}
    env.pop("SIMULATOR_ENABLED", None)
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c",
                          "from django.conf import settings as s; print(s.DEBUG, s.SIMULATOR_ENABLED, "
                          "s.SESSION_COOKIE_SECURE, s.SECURE_SSL_REDIRECT)"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines()[-1].split() == ["False", "False", "True", "True"], out.stderr

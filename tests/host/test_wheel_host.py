"""The app as a Django developer gets it: the wheel, built from this checkout and installed in a
fresh virtualenv outside it, added to a `django-admin startproject` host by the README's steps
only (mounted under /assistant/, the host's own websocket route beside it, the host's base
template, a host tool), then driven in Chromium:

- a bare install (the wheel and Daphne, no extra) passes `manage.py check` and migrates;
- a bad RELAY_* value is reported by `manage.py check` with its id;
- an answer streams live in two tabs of the app's chat page;
- a host page whose sync view starts a request with the Python API embeds the answer live;
- the host's tool runs once per call id, and the host's own socket route still answers.

Slow (a wheel, a virtualenv): marked `wheel`; skipped without Chromium unless CI=true.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, free_port, require_chromium
from tests.servers import stop

pytestmark = [pytest.mark.wheel, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "host-pw-123"

SETTINGS_TAIL = '''
# --- responses-relay, as the README's "Use it in your own project" says --------------------------
INSTALLED_APPS += ["channels", "responses_app", "mysite"]
ASGI_APPLICATION = "mysite.asgi.application"
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
RELAY_BASE_TEMPLATE = "host_base.html"
RELAY_TOOLS = ["mysite.tools.lookup_order"]
TEMPLATES[0]["DIRS"] = [BASE_DIR / "templates"]
LOGIN_REDIRECT_URL = "/assistant/"
'''

URLS = '''
from django.contrib import admin
from django.urls import include, path

from mysite import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("assistant/", include("responses_app.urls")),
    path("report/", views.report),
]
'''

ASGI = '''
import os

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
django_asgi_app = ASGIStaticFilesHandler(get_asgi_application())  # development, under uvicorn

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.generic.websocket import WebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from responses_app.routing import ExactOriginValidator, websocket_urlpatterns  # noqa: E402


class Echo(WebsocketConsumer):
    def receive(self, text_data=None, bytes_data=None):
        self.send(text_data="host:" + (text_data or ""))


application = ProtocolTypeRouter({
    "http": django_asgi_app,
    "websocket": ExactOriginValidator(AuthMiddlewareStack(URLRouter([
        path("assistant/", URLRouter(websocket_urlpatterns)),
        path("ws/echo/", Echo.as_asgi()),
    ]))),
})
'''

VIEWS = '''
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from responses_app import api


@login_required
def report(request):
    """A plain sync view: starts a request with the Python API and embeds its answer live."""
    started = api.submit(request.user, "Write the weekly report", model="sim-long",
                         metadata={"sim.tokens_per_s": "40", "sim.tokens": "120", "sim.seed": "3"})
    return render(request, "report.html", {"started": started})
'''

TOOLS = '''
from pathlib import Path

from django.dispatch import receiver

from responses_app import signals
from responses_app.api import tool

CALLS = Path(__file__).resolve().parent.parent / "tool-calls.txt"


@tool(description="Look an order up by its number.",
      parameters={"type": "object", "additionalProperties": False, "required": ["number"],
                  "properties": {"number": {"type": "string"}}})
def lookup_order(args):
    with CALLS.open("a") as out:
        out.write(f"ran {args['number']}\\n")
    return {"number": args["number"], "status": "shipped"}


@receiver(signals.tool_called)
def heard(sender, call_id, name, ok, **kwargs):
    with CALLS.open("a") as out:
        out.write(f"signal {name} {call_id} {ok}\\n")
'''

HOST_BASE = '''<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{% block title %}Host{% endblock %}</title></head>
<body class="host-body"><header id="host-header"><a href="/">My host</a></header>
<main id="host-main">{% block content %}{% endblock %}</main></body></html>
'''

LOGIN = '''{% extends "host_base.html" %}
{% block content %}<form method="post">{% csrf_token %}{{ form.as_p }}<button type="submit">Log in</button></form>
{% endblock %}
'''

REPORT = '''{% extends "host_base.html" %}{% load relay %}
{% block content %}<h1 id="host-title">Weekly report</h1>{% relay_response started %}{% endblock %}
'''


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600
        ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the host's directory, its virtualenv's python), built from the wheel."""
    require_chromium()
    work = tmp_path_factory.mktemp("host")
    dist = work / "dist"
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)], cwd=work)
    [wheel] = dist.glob("responses_relay-*.whl")
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=work)
    python = venv / "bin" / "python"
    # First as the Channels docs say: the app and Daphne, no extra (a bare install must import).
    run([str(python), "-m", "pip", "install", "-q", str(wheel), "daphne"], cwd=work, timeout=900)
    run([str(venv / "bin" / "django-admin"), "startproject", "mysite", "."], cwd=work)
    site = work / "mysite"
    with (site / "settings.py").open("a") as settings:
        settings.write(SETTINGS_TAIL)
    (site / "urls.py").write_text(URLS)
    (site / "asgi.py").write_text(ASGI)
    (site / "views.py").write_text(VIEWS)
    (site / "tools.py").write_text(TOOLS)
    (site / "apps.py").write_text(textwrap.dedent('''
        from django.apps import AppConfig


        class MysiteConfig(AppConfig):
            name = "mysite"

            def ready(self):
                from . import tools  # noqa: F401 - the tool and the signal receiver
    '''))
    (work / "templates").mkdir()
    (work / "templates" / "host_base.html").write_text(HOST_BASE)
    (work / "templates" / "report.html").write_text(REPORT)
    (work / "templates" / "registration").mkdir()
    (work / "templates" / "registration" / "login.html").write_text(LOGIN)
    env = host_env(work)
    bare = run([str(python), "manage.py", "check"], cwd=work, env=env)
    (work / "bare-check.txt").write_text(bare.stdout + bare.stderr)
    run([str(python), "manage.py", "migrate", "--noinput"], cwd=work, env=env)
    # Then the server extra in the same virtualenv, for the browser tests (uvicorn).
    run([str(python), "-m", "pip", "install", "-q", f"{wheel}[server]"], cwd=work, timeout=900)
    run([str(python), "manage.py", "shell", "-c",
         f"from django.contrib.auth import get_user_model; "
         f"get_user_model().objects.create_user('ada', password={PASSWORD!r})"], cwd=work, env=env)
    yield work, python
    shutil.rmtree(work, ignore_errors=True)


def host_env(work: Path) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    return {**{k: v for k, v in os.environ.items() if k in keep}, "PYTHONUNBUFFERED": "1"}


def test_the_wheel_is_the_app_and_nothing_else(host: tuple[Path, Path]) -> None:
    work, python = host
    listing = run([str(python), "-c", "import importlib.metadata as m; "
                   "print('\\n'.join(str(f) for f in m.files('responses-relay')))"], cwd=work).stdout
    assert "responses_app/templates/responses_app/chat.html" in listing
    assert "responses_app/static/responses_app/chat/main.js" in listing
    assert "responses_app/migrations/0001_initial.py" in listing
    assert not re.search(r"^project/", listing, re.M), "the demo site is not in the wheel"
    site_packages = run([str(python), "-c", "import django, os; print(os.path.dirname(os.path.dirname("
                         "django.__file__)))"], cwd=work).stdout.strip()
    assert not (Path(site_packages) / "project").exists()


def test_a_bare_install_passes_check_and_migrates(host: tuple[Path, Path]) -> None:
    """`pip install responses-relay daphne`, no extra: `manage.py check` and `migrate` ran in the fixture,
    before the server extra was added; the WebSocket-mode client is not needed to import the app."""
    work, _ = host
    said = (work / "bare-check.txt").read_text()
    assert "System check identified" in said and "ERRORS" not in said, said
    assert "websockets" not in said, said


def test_check_reports_a_bad_setting_by_its_id(host: tuple[Path, Path]) -> None:
    work, python = host
    clean = subprocess.run([str(python), "manage.py", "check"], cwd=work, env=host_env(work), capture_output=True,
                           text=True, timeout=120)
    assert clean.returncode == 0, clean.stderr
    settings = work / "mysite" / "settings.py"
    original = settings.read_text()
    try:
        settings.write_text(original + 'RELAY_SUBMIT_RATE = "lots"\n')
        bad = subprocess.run([str(python), "manage.py", "check"], cwd=work, env=host_env(work),
                             capture_output=True, text=True, timeout=120)
        assert bad.returncode != 0 and "responses_app.E002" in bad.stderr and "RELAY_SUBMIT_RATE" in bad.stderr
    finally:
        settings.write_text(original)


@pytest.fixture(scope="module")
def served(host: tuple[Path, Path]) -> Iterator[str]:
    work, python = host
    port = free_port()
    log = (work / "server.log").open("w")
    proc = subprocess.Popen([str(python), "-m", "uvicorn", "mysite.asgi:application", "--port", str(port),
                             "--lifespan", "off"], cwd=work, env=host_env(work), stdout=log,
                            stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/accounts/login/", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, (work / "server.log").read_text()[-3000:]
        time.sleep(0.1)
    try:
        yield url
    finally:
        stop(proc)  # type: ignore[arg-type]


def test_a_host_streams_embeds_and_runs_its_tool(host: tuple[Path, Path], served: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    work, _ = host
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context()
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(served + "/accounts/login/?next=/assistant/")
        page.fill("input[name=username]", "ada")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/assistant/$"))
        # The app's page inside the host's base template, its CSS scoped to the app's markup.
        expect(page.locator("#host-header")).to_be_visible()
        fonts = page.evaluate("[getComputedStyle(document.body).fontFamily,"
                              " getComputedStyle(document.querySelector('.relay')).fontFamily]")
        assert "system-ui" not in fonts[0] and "system-ui" in fonts[1], f"the host's body is untouched: {fonts}"

        # Two tabs follow one answer live.
        page.fill("#composer textarea[name=input]", "Tell me a long story")
        page.select_option("#composer select[name=model]", "sim-long")
        page.click("#composer details.advanced > summary")
        page.fill("#composer textarea[name=metadata]",
                  '{"sim.tokens_per_s": "30", "sim.tokens": "150", "sim.seed": "1"}')
        page.click("#composer button[type=submit]")
        turn = page.locator("article.turn").last
        expect(turn).to_have_attribute("data-request-id", re.compile(".+"), timeout=15_000)
        second = context.new_page()
        second.goto(page.url)
        for tab in (page, second):
            tab.wait_for_function("() => { const t = document.querySelector('article.turn:last-of-type .answer');"
                                  " return t && t.textContent.trim().length > 20; }", timeout=30_000)
        first_len = len(second.locator("article.turn").last.locator(".answer").inner_text())
        second.wait_for_function(f"() => document.querySelector('article.turn:last-of-type .answer')"
                                 f".textContent.length > {first_len + 20}", timeout=30_000)
        for tab in (page, second):
            expect(tab.locator("article.turn").last.locator("[data-badge]")).to_have_attribute(
                "data-badge", "completed", timeout=60_000)

        # The host's own socket route, beside the app's.
        echoed = page.evaluate("""() => new Promise((resolve, reject) => {
            const ws = new WebSocket(`ws://${location.host}/ws/echo/`);
            ws.onopen = () => ws.send("hi");
            ws.onmessage = (e) => resolve(e.data);
            ws.onclose = (e) => reject(new Error("closed " + e.code));
        })""")
        assert echoed == "host:hi"

        # A host page: a sync view starts a request with the Python API and embeds it live.
        page.goto(served + "/report/")
        expect(page.locator("#host-title")).to_have_text("Weekly report")
        embedded = page.locator(".relay-embed article.turn")
        expect(embedded).to_have_count(1)
        embedded.locator(".answer").wait_for()
        page.wait_for_function(
            "() => document.querySelector('.relay-embed .answer').textContent.trim().length > 40", timeout=30_000)
        expect(embedded.locator("[data-badge]")).to_have_attribute("data-badge", "completed", timeout=60_000)

        # The host's tool: offered, called by the model, run once per call id, heard by the signal.
        page.goto(served + "/assistant/")
        page.fill("#composer textarea[name=input]", "Where is order 42?")
        page.select_option("#composer select[name=model]", "sim-function")
        page.click("#composer button[type=submit]")
        expect(page.locator("article.turn").last.locator("[data-badge]")).to_have_attribute(
            "data-badge", "completed", timeout=60_000)
        page.reload()
        expect(page.locator("article.turn").last.locator("[data-badge]")).to_have_attribute("data-badge", "completed")
        assert errors == [], errors
        browser.close()
    calls = (work / "tool-calls.txt").read_text().splitlines()
    ran = [line for line in calls if line.startswith("ran ")]
    heard = [line for line in calls if line.startswith("signal lookup_order ")]
    assert len(ran) == 1 and len(heard) == 1 and heard[0].endswith(" True"), calls


def test_a_request_submitted_from_another_process_starts_within_a_second(host: tuple[Path, Path],
                                                                         served: str) -> None:
    """The shell, a task queue: no runner there. The web process's runner takes it (here: SQLite
    and the in-memory layer, so its watch of pending rows), not the sweep of abandoned ones."""
    work, python = host
    script = ("import time; from django.contrib.auth import get_user_model; from responses_app import api; "
              "from responses_app.models import ResponseRequest as R; "
              "r = api.submit(get_user_model().objects.get(username='ada'), 'From the shell', model='sim-text'); "
              "t = time.monotonic(); "
              "exec('while R.objects.get(pk=r.pk).status == \\'pending\\' and time.monotonic() - t < 10: "
              "time.sleep(0.02)'); "
              "print(R.objects.get(pk=r.pk).status, round(time.monotonic() - t, 3))")
    out = run([str(python), "manage.py", "shell", "-c", script], cwd=work, env=host_env(work)).stdout.split()
    status, took = out[-2], float(out[-1])
    assert status in ("streaming", "completed") and took < 1.0, out

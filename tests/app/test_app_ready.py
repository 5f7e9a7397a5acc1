"""Signal receivers are connected in `ResponsesAppConfig.ready` (apps.connect_receivers) and nowhere
else: a process that never imports the URLconf (a management command, a worker) hears them too."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECEIVERS = ("responses_app-settings-reload", "relay-start-runner-with-the-first-request",
             "relay-close-sockets-on-logout", "relay-recheck-sockets-on-user-save")
SIGNALS = {"request_started", "request_finished", "setting_changed", "user_logged_in", "user_logged_out",
           "post_save", "pre_save", "post_delete", "pre_delete", "post_migrate", "connection_created"}


def test_every_receiver_is_connected_once_the_apps_are_ready_without_the_urlconf() -> None:
    script = (
        "import sys, django; django.setup()\n"
        "from django.core import signals as core\n"
        "from django.contrib.auth import signals as auth\n"
        "from django.db.models import signals as models\n"
        "uids = {key[0] for s in (core.request_started, core.setting_changed, auth.user_logged_out,"
        " models.post_save) for key, *_ in s.receivers}\n"
        "print(sorted(u for u in uids if isinstance(u, str)))\n"
        "print(any(m.startswith('responses_app.web') or m == 'responses_app.urls' for m in sys.modules))\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    connected, urls_imported = done.stdout.splitlines()[-2:]
    assert urls_imported == "False", "the check must run without the URLconf"
    for uid in RECEIVERS:
        assert repr(uid) in connected, f"{uid} is not connected by AppConfig.ready"


def test_no_module_connects_a_receiver_as_a_side_effect_of_its_import() -> None:
    found = []
    for path in sorted((ROOT / "responses_app").rglob("*.py")):
        if path.name == "apps.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    call = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if isinstance(call, ast.Name) and call.id == "receiver":
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} @receiver")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "connect":
                target = node.func.value
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name in SIGNALS:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}.connect")
    assert found == [], "connect receivers in apps.connect_receivers: " + ", ".join(found)

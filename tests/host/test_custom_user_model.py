"""A host with its own user model (AUTH_USER_MODEL): the app's relations, migrations, pages, admin
and demo command follow it. Run in a subprocess, under tests.custom_user.settings: the user
model cannot change inside a process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_custom_user_model_works_throughout() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "DJANGO_SETTINGS"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--ds=tests.custom_user.settings", "tests/custom_user/check_custom_user.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]

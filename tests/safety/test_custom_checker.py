"""RELAY_SAFETY_CHECKER as a dotted path to a checker factory: used when it is one, a clear
ImproperlyConfigured when it does not import or does not make a checker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from responses_app.safety.checkers import Verdict, checker_from_settings, judge, reset_checker

ROOT = Path(__file__).resolve().parents[2]
made: list[int] = []


class ShoutingChecker:
    """Flags text written in capitals: the README's example of a custom checker."""

    name = "shouting"

    async def check(self, text: str, *, context: str = "", kind: str = "output") -> Verdict:
        words = [w for w in text.split() if len(w) > 3]
        loud = bool(words) and all(w.isupper() for w in words)
        return Verdict(flagged=loud, checker=self.name, categories=("shouting",) if loud else ())


def make_checker() -> ShoutingChecker:
    made.append(1)
    return ShoutingChecker()


def not_a_checker() -> object:
    return object()


class SyncCheck:
    name = "sync"

    def check(self, text: str, *, context: str = "", kind: str = "output") -> Verdict:
        return Verdict(flagged=False, checker=self.name)


NOT_CALLABLE = 42


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    reset_checker()
    yield
    reset_checker()


def test_a_dotted_path_makes_the_processs_checker_once(settings: Any) -> None:
    settings.RELAY_SAFETY_CHECKER = f"{__name__}.make_checker"
    made.clear()
    checker = checker_from_settings()
    assert checker_from_settings() is checker and made == [1]
    verdict = asyncio.run(judge(checker, "STOP SHOUTING NOW", timeout=1, fail_closed=True))
    assert verdict.flagged and verdict.checker == "shouting" and verdict.categories == ("shouting",)
    assert not asyncio.run(judge(checker, "a calm sentence", timeout=1, fail_closed=True)).flagged


@pytest.mark.parametrize("path, message", [
    ("tests.safety.no_such_module.make", "does not import"),
    (f"{__name__}.no_such_name", "does not import"),
    (f"{__name__}.NOT_CALLABLE", "is not callable"),
    (f"{__name__}.not_a_checker", "is not a checker"),
    (f"{__name__}.SyncCheck", "is not a checker"),
])
def test_a_path_that_makes_no_checker_is_a_clear_error(settings: Any, path: str, message: str) -> None:
    settings.RELAY_SAFETY_CHECKER = path
    with pytest.raises(ImproperlyConfigured, match=message):
        checker_from_settings()


def test_a_checker_name_that_is_neither_built_in_nor_a_path_is_reported_by_check() -> None:
    done = manage_check(RELAY_SAFETY_MODE="buffered", RELAY_SAFETY_CHECKER="moderations")
    assert done.returncode != 0
    assert "responses_app.E002" in done.stderr, done.stderr
    assert "RELAY_SAFETY_CHECKER must be rules, moderation or a dotted path" in done.stderr


def manage_check(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "REDIS_", "RELAY_", "CHANNEL_"))}
    return subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**base, "DJANGO_ENV": "development", **env})


@pytest.mark.parametrize("env, message", [
    ({"RELAY_SAFETY_MODE": "buffered", "RELAY_SAFETY_CHECKER": "tests.safety.no_such_module.make"},
     "does not import"),
    ({"RELAY_SAFETY_MODES": "gpt-x=progressive", "RELAY_SAFETY_CHECKER": f"{__name__}.not_a_checker"},
     "is not a checker"),
    ({"RELAY_SAFETY_PRECHECK": "true", "RELAY_SAFETY_CHECKER": f"{__name__}.SyncCheck"}, "is not a checker"),
    ({"RELAY_SAFETY_MODE": "progressive", "RELAY_SAFETY_RULES": "(unclosed"}, "is not a regular expression"),
])
def test_manage_py_check_refuses_a_checker_that_cannot_work(env: dict[str, str], message: str) -> None:
    done = manage_check(**env)
    assert done.returncode != 0, done.stdout
    assert "responses_app.E001" in done.stderr and message in done.stderr, done.stderr


def test_manage_py_check_passes_a_good_checker_and_ignores_one_no_mode_uses() -> None:
    good = manage_check(RELAY_SAFETY_MODE="buffered", RELAY_SAFETY_CHECKER=f"{__name__}.make_checker")
    assert good.returncode == 0, good.stderr
    unused = manage_check(RELAY_SAFETY_MODE="off", RELAY_SAFETY_CHECKER=f"{__name__}.not_a_checker")
    assert unused.returncode == 0, unused.stderr


def test_the_asgi_application_refuses_a_bad_checker_daphne_runs_no_checks() -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "REDIS_", "RELAY_", "CHANNEL_"))}
    done = subprocess.run([sys.executable, "-c", "import project.asgi"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**base, "DJANGO_ENV": "development", "DJANGO_SETTINGS_MODULE":
                                            "project.settings", "RELAY_SAFETY_MODE": "buffered",
                                            "RELAY_SAFETY_CHECKER": f"{__name__}.not_a_checker"})
    assert done.returncode != 0 and "ImproperlyConfigured" in done.stderr and "is not a checker" in done.stderr

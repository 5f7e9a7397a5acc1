"""RELAY_SAFETY_CHECKER as a dotted path to a checker factory: used when it is one, a clear
ImproperlyConfigured when it does not import or does not make a checker."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from responses_app.safety.checkers import Verdict, checker_from_settings, judge, reset_checker

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


def test_a_checker_name_that_is_neither_built_in_nor_a_path_is_refused_at_startup() -> None:
    from tests.test_settings_services import settings_of

    done = settings_of(RELAY_SAFETY_CHECKER="moderations")
    assert done.returncode != 0 and "RELAY_SAFETY_CHECKER must be rules, moderation or a dotted path" in done.stderr

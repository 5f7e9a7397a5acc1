"""The built-in rules checker and judge(): context, split phrases, timeouts and the error policy."""

from __future__ import annotations

import asyncio

import pytest

from responses_app.safety.checkers import RulesChecker, Verdict, judge


def test_a_rule_matches_case_insensitively() -> None:
    checker = RulesChecker([r"forbidden \w+"])
    verdict = asyncio.run(checker.check("This is FORBIDDEN Lore."))
    assert verdict.flagged and verdict.categories == (r"rule:forbidden \w+",)
    assert verdict.result == "flagged"


def test_a_phrase_split_between_context_and_window_is_caught() -> None:
    checker = RulesChecker(["launch codes"])
    assert checker.categories(" codes are here.", context="Here are the launch")


def test_a_verdict_says_where_the_earliest_match_reaching_into_the_window_starts() -> None:
    checker = RulesChecker(["launch codes", r"codes \w+"])
    verdict = asyncio.run(checker.check(" codes are here.", context="Here are the launch"))
    assert verdict.flagged and verdict.start == len("Here are the ")  # in the context: the phrase's start
    old = asyncio.run(checker.check("And codes again.", context="launch codes. "))  # the first is judged
    assert old.start == len("launch codes. And ")
    assert asyncio.run(checker.check("Nothing here.")).start is None


def test_a_timeout_or_an_error_does_not_know_where_a_violation_starts() -> None:
    for checker in (_Broken(), _Slow()):
        verdict = asyncio.run(judge(checker, "x", timeout=0.01, fail_closed=True))
        assert verdict.flagged and verdict.error and verdict.start is None


def test_text_wholly_inside_the_context_is_not_judged_again() -> None:
    checker = RulesChecker(["launch codes"])
    assert checker.categories(" Nothing more.", context="the launch codes") == ()


def test_a_bad_rule_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not a regular expression"):
        RulesChecker(["(unclosed"])


class _Slow:
    name = "slow"

    async def check(self, text: str, *, context: str = "", kind: str = "output") -> Verdict:
        await asyncio.sleep(10)
        raise AssertionError("not reached")


class _Broken:
    name = "broken"

    async def check(self, text: str, *, context: str = "", kind: str = "output") -> Verdict:
        raise RuntimeError("service down")


@pytest.mark.parametrize("fail_closed", [True, False])
def test_a_timeout_follows_the_error_policy(fail_closed: bool) -> None:
    verdict = asyncio.run(judge(_Slow(), "x", timeout=0.01, fail_closed=fail_closed))  # type: ignore[arg-type]
    assert verdict.flagged is fail_closed and verdict.result == "error" and "timeout" in verdict.error


def test_a_checker_error_is_a_verdict_not_a_crash() -> None:
    verdict = asyncio.run(judge(_Broken(), "x", timeout=1, fail_closed=True))  # type: ignore[arg-type]
    assert verdict.flagged and "service down" in verdict.error and verdict.elapsed >= 0

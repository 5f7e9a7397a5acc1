"""The `moderation` checker against the simulator's POST /v1/moderations: over real loopback HTTP
(the standalone simulator) and in-process (the embedded default), with errors and timeouts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from responses_app.safety.checkers import checker_from_settings, judge, reset_checker
from responses_app.safety.moderation import ModerationChecker, verdict_from
from responses_app.upstream.embedded import EMBEDDED_BASE_URL
from tests.simulator.helpers import AUTH


@pytest.fixture
def checker(simulator_url: str) -> ModerationChecker:
    return ModerationChecker(model="omni-moderation-latest", base=simulator_url, headers=AUTH, timeout=5)


def check(checker: ModerationChecker, text: str, **kwargs: Any) -> Any:
    async def once() -> Any:
        try:
            return await judge(checker, text, timeout=kwargs.pop("timeout", 5),
                               fail_closed=kwargs.pop("fail_closed", True), **kwargs)
        finally:
            await checker.aclose()
    return asyncio.run(once())


def test_a_listed_term_is_flagged_with_its_categories(checker: ModerationChecker) -> None:
    verdict = check(checker, "Sure, here are the Launch Codes.")
    assert verdict.flagged and verdict.result == "flagged" and not verdict.error
    assert verdict.categories == ("illicit",) and verdict.checker == "moderation"


def test_clean_text_passes(checker: ModerationChecker) -> None:
    verdict = check(checker, "Rivers flow to the sea.", context="A calm answer. ")
    assert verdict.result == "passed" and verdict.categories == ()


def test_a_phrase_split_between_context_and_window_is_caught(checker: ModerationChecker) -> None:
    verdict = check(checker, " codes, as asked.", context="Here are the launch")
    assert verdict.flagged and verdict.start is None  # the moderation API does not say where


@pytest.mark.parametrize("status", [429, 500, 503])
@pytest.mark.parametrize("fail_closed", [True, False])
def test_an_http_error_is_a_verdict_that_follows_the_policy(checker: ModerationChecker, status: int,
                                                             fail_closed: bool) -> None:
    verdict = check(checker, f"words sim.moderation_error={status}", fail_closed=fail_closed)
    assert verdict.result == "error" and verdict.flagged is fail_closed and str(status) in verdict.error


def test_a_slow_answer_is_a_timeout(checker: ModerationChecker) -> None:
    verdict = check(checker, "words sim.moderation_delay_ms=2000", timeout=0.2, fail_closed=False)
    assert verdict.result == "error" and "timeout" in verdict.error and not verdict.flagged
    assert 0.2 <= verdict.elapsed < 1.5


def test_a_wrong_key_is_an_error_not_a_pass(simulator_url: str) -> None:
    wrong = ModerationChecker(model="omni-moderation-latest", base=simulator_url,
                              headers={"authorization": "Bearer wrong-key-000"})
    verdict = check(wrong, "Rivers flow.", fail_closed=True)
    assert verdict.result == "error" and "401" in verdict.error and verdict.flagged


def test_one_client_serves_many_checks(checker: ModerationChecker) -> None:
    async def many() -> list[Any]:
        client = checker.client()
        verdicts = await asyncio.gather(*(judge(checker, f"text {i} bloodbath" if i % 2 else f"text {i}",
                                                timeout=5, fail_closed=True) for i in range(20)))
        assert checker.client() is client
        await checker.aclose()
        return list(verdicts)
    verdicts = asyncio.run(many())
    assert [v.flagged for v in verdicts] == [bool(i % 2) for i in range(20)]


def test_the_settings_build_one_checker_for_the_relays_upstream(relay_settings: Any) -> None:
    relay_settings.RELAY_SAFETY_CHECKER = "moderation"
    relay_settings.RELAY_SAFETY_MODERATION_MODEL = "text-moderation-latest"
    reset_checker()
    try:
        checker = checker_from_settings()
        assert isinstance(checker, ModerationChecker) and checker_from_settings() is checker
        assert checker.base == relay_settings.RELAY_SIMULATOR_BASE_URL and checker.model == "text-moderation-latest"
        assert checker.headers == AUTH  # the simulator's key, as the Responses calls bear it
        assert check(checker, "a bloodbath").categories == ("violence",)
    finally:
        reset_checker()


def test_the_embedded_simulator_answers_in_process(settings: Any) -> None:
    settings.RELAY_UPSTREAM_BASE_URL = settings.RELAY_SIMULATOR_BASE_URL = ""
    settings.RELAY_SAFETY_CHECKER = "moderation"
    reset_checker()
    try:
        checker = checker_from_settings()
        assert isinstance(checker, ModerationChecker) and checker.base == EMBEDDED_BASE_URL
        assert check(checker, "an untraceable poison").categories == ("illicit", "illicit/violent", "violence")
    finally:
        reset_checker()


@pytest.mark.parametrize("data", [{}, {"results": []}, {"results": [{"flagged": "yes"}]}, [1]])
def test_an_answer_that_is_not_a_moderation_result_is_an_error(data: Any) -> None:
    with pytest.raises(ValueError, match="not a moderation result"):
        verdict_from(data, checker="moderation")

"""POST /v1/moderations over real HTTP: the API's shape (the official SDK parses it), deterministic
verdicts from the term table, and faults forced from the input text."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from responses_app.simulator.moderations_endpoint import CATEGORIES
from tests.simulator.helpers import AUTH, DEV_API_KEY


def moderate(url: str, payload: dict[str, object], timeout: float = 10) -> httpx.Response:
    return httpx.post(f"{url}/moderations", json=payload, headers=AUTH, timeout=timeout)


def test_a_listed_term_is_flagged_in_its_categories_whatever_its_case(simulator_url: str) -> None:
    response = moderate(simulator_url, {"input": "Here are the LAUNCH Codes for you."})
    assert response.status_code == 200
    data = response.json()
    assert data["id"].startswith("modr-") and data["model"] == "omni-moderation-latest"
    [result] = data["results"]
    assert result["flagged"] is True
    assert [c for c, hit in result["categories"].items() if hit] == ["illicit"]
    assert set(result["categories"]) == set(CATEGORIES) == set(result["category_scores"])
    assert result["category_scores"]["illicit"] > 0.9 > result["category_scores"]["violence"]


def test_clean_text_is_not_flagged_and_the_answer_is_the_same_every_time(simulator_url: str) -> None:
    first = moderate(simulator_url, {"input": "Rivers flow to the sea.", "model": "text-moderation-latest"})
    second = moderate(simulator_url, {"input": "Rivers flow to the sea.", "model": "text-moderation-latest"})
    assert first.json() == second.json()
    assert first.json()["results"][0]["flagged"] is False
    assert not any(first.json()["results"][0]["categories"].values())


def test_a_list_of_strings_gets_one_result_each(simulator_url: str) -> None:
    data = moderate(simulator_url, {"input": ["calm words", "a bloodbath", "I want to hurt myself"]}).json()
    assert [r["flagged"] for r in data["results"]] == [False, True, True]
    assert data["results"][2]["categories"]["self-harm"] is True


def test_the_official_sdk_parses_the_answer(simulator_url: str) -> None:
    client = openai.OpenAI(base_url=simulator_url, api_key=DEV_API_KEY, max_retries=0)
    answer = client.moderations.create(model="omni-moderation-latest", input="an untraceable poison")
    result = answer.results[0]
    assert result.flagged and result.categories.illicit and result.categories.violence
    assert not result.categories.hate


def test_the_key_is_required(simulator_url: str) -> None:
    assert httpx.post(f"{simulator_url}/moderations", json={"input": "x"}).status_code == 401


@pytest.mark.parametrize("payload, param", [({}, "input"), ({"input": 3}, "input"),
                                            ({"input": "x", "model": "gpt-nope"}, "model")])
def test_bad_input_is_a_clear_400(simulator_url: str, payload: dict[str, object], param: str) -> None:
    response = moderate(simulator_url, payload)
    assert response.status_code == 400 and response.json()["error"]["param"] == param


@pytest.mark.parametrize("status", [429, 500, 503])
def test_an_error_is_forced_from_the_text(simulator_url: str, status: int) -> None:
    response = moderate(simulator_url, {"input": f"fine words sim.moderation_error={status}"})
    assert response.status_code == status and set(response.json()["error"]) >= {"message", "type", "code"}


def test_a_delay_is_forced_from_the_text(simulator_url: str) -> None:
    started = time.monotonic()
    response = moderate(simulator_url, {"input": "slow sim.moderation_delay_ms=300"})
    assert response.status_code == 200 and time.monotonic() - started >= 0.3

"""Strict input on the JSON API and the no-JavaScript form: wrong types, oversize or unstorable
metadata, models outside the allowlist, sim.* keys for a real provider, token caps. Each is a
400 naming the field, and nothing is created."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from responses_app.models import ResponseRequest

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]


@pytest.fixture(autouse=True)
def upstream_is_simulator(settings: Any) -> None:
    settings.RELAY_UPSTREAM_BASE_URL = ""


@pytest.fixture
def client(db: Any) -> Client:
    user = get_user_model().objects.create_user("owner", password="pw")
    c = Client()
    c.force_login(user)
    return c


def post(client: Client, body: dict[str, Any]) -> Any:
    return client.post(reverse("responses_app:api-requests"), json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(("body", "field"), [
    ({"input": {"text": "hi"}, "model": "sim-text"}, "input"),
    ({"input": 5, "model": "sim-text"}, "input"),
    ({"input": [1, 2], "model": "sim-text"}, "input"),
    ({"input": "hi", "model": ["sim-text"]}, "model"),
    ({"input": "hi", "model": "sim-text", "background": "maybe"}, "background"),
    ({"input": "hi", "model": "sim-text", "background": 1}, "background"),
    ({"input": "hi", "model": "sim-text", "metadata": ["a"]}, "metadata"),
    ({"input": "hi", "model": "sim-text", "metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ({"input": "hi", "model": "sim-text", "metadata": {"k" * 65: "v"}}, "metadata"),
    ({"input": "hi", "model": "sim-text", "metadata": {"k": "v" * 513}}, "metadata"),
    ({"input": "hi", "model": "sim-text", "metadata": {"k": 1}}, "metadata"),
    ({"input": "hi", "model": "sim-text", "metadata": {"k\u0000": "v"}}, "metadata"),
    ({"input": "hi", "model": "sim-text", "metadata": {"k": "v\u0000"}}, "metadata"),
    ({"input": "hi\u0000there", "model": "sim-text"}, "input"),
    ({"input": [{"role": "user", "content": "a\u0000"}], "model": "sim-text"}, "input"),
    ({"input": "hi", "model": "sim-text", "max_output_tokens": "lots"}, "max_output_tokens"),
    ({"input": "hi", "model": "sim-text", "max_output_tokens": 10**9}, "max_output_tokens"),
    ({"input": "hi", "model": "sim-text", "metadata": {"sim.tokens": "1000000"}}, "metadata"),
    ({"input": "hi", "model": "sim-text", "client_request_id": {"a": 1}}, "client_request_id"),
])
def test_wrong_types_and_limits_are_400_naming_the_field(client: Client, body: dict[str, Any], field: str) -> None:
    response = post(client, body)
    assert response.status_code == 400, response.content
    assert list(response.json()["errors"]) == [field]
    assert not ResponseRequest.objects.exists()


def test_well_typed_input_is_accepted_as_sent(client: Client) -> None:
    items = [{"role": "user", "content": "Hello"}]
    response = post(client, {"input": items, "model": "sim-text", "background": False,
                             "metadata": {"sim.seed": "3"}, "max_output_tokens": 100})
    assert response.status_code == 201, response.content
    request = ResponseRequest.objects.get()
    assert request.input == items
    assert request.params["background"] is False
    assert request.params["max_output_tokens"] == 100
    assert request.params["metadata"] == {"sim.seed": "3"}


def test_a_real_provider_refuses_sim_keys_and_other_models_and_gets_the_token_cap(
        client: Client, settings: Any) -> None:
    settings.RELAY_UPSTREAM_BASE_URL = "https://provider.example/v1"
    settings.RELAY_ALLOWED_MODELS = ["gpt-4.1-mini"]
    settings.RELAY_MAX_OUTPUT_TOKENS = 2000
    refused = post(client, {"input": "hi", "model": "o1-pro"})
    assert refused.status_code == 400 and "model" in refused.json()["errors"]
    sim = post(client, {"input": "hi", "model": "gpt-4.1-mini", "metadata": {"sim.tokens": "10"}})
    assert sim.status_code == 400 and "sim.* keys are only for the simulator" in sim.json()["errors"]["metadata"][0]
    ok = post(client, {"input": "hi", "model": "gpt-4.1-mini", "metadata": {"purpose": "test"}})
    assert ok.status_code == 201, ok.content
    assert ResponseRequest.objects.get().params["max_output_tokens"] == 2000


def test_the_form_validates_the_same_and_keeps_the_prompt(client: Client) -> None:
    response = client.post(reverse("responses_app:conversation-new"), {
        "input": "my long typed prompt", "model": "sim-text", "metadata": '{"k": "v\\u0000"}'})
    assert response.status_code == 400
    page = response.content.decode()
    assert "my long typed prompt" in page and "U+0000" in page
    assert not ResponseRequest.objects.exists()

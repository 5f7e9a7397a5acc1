"""RELAY_PROVIDERS: the setting, its checks, the door's choice of provider and the grouped picker.
The relay's calls to each provider are in tests/upstream/test_providers_relay.py."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core import checks
from django.test import Client
from django.urls import reverse

from responses_app import submission
from responses_app.conf import app_settings
from responses_app.models import ResponseRequest
from responses_app.providers import DEFAULT, Supports
from responses_app.relay.bodies import build_body
from responses_app.upstream import credentials

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]

TWO = {
    "openai": {"label": "OpenAI", "base_url": "https://api.openai.com/v1", "api_key": "sk-openai-secret-0001",
               "models": ["gpt-5", "gpt-5-mini"]},
    "local": {"label": "On this machine", "base_url": "http://127.0.0.1:11434/v1", "transport": "sse",
              "models": ["llama3.2"], "supports": {"retrieve": False, "cancel": False, "background": False,
                                                   "store": False}},
}


def ids(found: list[checks.CheckMessage]) -> list[str]:
    return sorted(str(m.id) for m in found if str(m.id).startswith("responses_app."))


def run_checks(deploy: bool = False) -> list[str]:
    return ids(checks.run_checks(tags=["responses_app"], include_deployment_checks=deploy))


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- the setting --------------------------------------------------------------------------------------

def test_without_providers_the_single_upstream_settings_are_the_one_provider(settings: Any) -> None:
    settings.RELAY_UPSTREAM_BASE_URL = "https://llm.example/v1"
    settings.RELAY_UPSTREAM_API_KEY = "sk-single"
    settings.RELAY_ALLOWED_MODELS = ["m-1"]
    (only,) = app_settings.providers().values()
    assert (only.name, only.base_url, only.api_key, only.models, only.simulator) == (
        DEFAULT, "https://llm.example/v1", "sk-single", ("m-1",), False)
    assert only.supports == Supports()
    assert app_settings.provider_for("m-1") is only and app_settings.provider_for("m-2") is None


def test_providers_parse_typed_and_from_the_environment(settings: Any) -> None:
    settings.RELAY_PROVIDERS = json.dumps(TWO)  # as RELAY_PROVIDERS='{…}' in an environment
    providers = app_settings.providers()
    assert list(providers) == ["openai", "local"]
    local = providers["local"]
    assert local.transport == "aiohttp" and local.title == "On this machine"
    assert local.supports == Supports(retrieve=False, cancel=False, background=False, websocket=True, store=False)
    assert app_settings.provider_for("llama3.2") is local
    assert app_settings.provider_for("gpt-5").name == "openai"  # type: ignore[union-attr]
    assert app_settings.provider_for("sim-text") is None, "no catch-all once providers are named"
    assert app_settings.provider("gone") is None
    assert not app_settings.upstream_is_simulator


@pytest.mark.parametrize("bad", [
    {"x": {"base_url": "ftp://host/v1", "models": ["m"]}},
    {"x": {"base_url": "http://host/v1", "models": "m", "transport": "carrier-pigeon"}},
    {"x": {"base_url": "http://host/v1", "models": [1]}},
    {"x": {"base_url": "http://host/v1", "supports": {"cancel": "maybe"}}},
    {"two words": {"base_url": "http://host/v1"}},
    ["not", "a", "dict"],
])
def test_a_provider_that_cannot_work_is_reported_not_raised(settings: Any, bad: Any) -> None:
    settings.RELAY_PROVIDERS = bad
    assert app_settings.PROVIDERS == {}  # reads as its default meanwhile
    assert "responses_app.E002" in run_checks()


def test_checks_name_what_is_wrong_with_providers(settings: Any) -> None:
    settings.RELAY_PROVIDERS = {
        "openai": {"base_url": "https://api.openai.com/v1", "models": ["gpt-5"], "colour": "blue"},  # E021, W020
        "azure": {"base_url": "https://me.openai.azure.com/openai/v1", "api_key": "k", "models": ["gpt-5"],
                  "transport": "websocket", "supports": {"websocket": False, "stroe": False}},  # E022 E023 W020
        "empty": {"base_url": "http://127.0.0.1:8080/v1"},  # E020
    }
    settings.RELAY_ALLOWED_MODELS = ["gpt-5", "gpt-6"]  # W021
    assert run_checks() == ["responses_app.E020", "responses_app.E021", "responses_app.E022",
                            "responses_app.E023", "responses_app.W020", "responses_app.W020",
                            "responses_app.W021"]


def test_two_sound_providers_pass_every_check_even_deploy(settings: Any) -> None:
    settings.RELAY_PROVIDERS = TWO
    assert run_checks(deploy=True) == []


def test_websocket_mode_without_the_websockets_package_is_a_check_error(settings: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare install (no `server` extra) imports; asking it for WebSocket mode is E008, with the extra
    to install, and never a ModuleNotFoundError at the first request."""
    from django.core.exceptions import ImproperlyConfigured

    from responses_app.upstream import websocket as upstream_ws

    monkeypatch.setattr(upstream_ws, "connect", None)  # as when `import websockets` failed; the embedded
    # simulator needs no package
    settings.RELAY_PROVIDERS = {
        "openai": {"base_url": "https://api.openai.com/v1", "api_key": "k", "models": ["gpt-5"],
                   "transport": "websocket"},
        "sim": {"base_url": upstream_ws.EMBEDDED_BASE_URL, "models": ["sim-text"], "transport": "websocket"},
    }
    found = [m for m in checks.run_checks() if m.id == "responses_app.E008"]
    assert [m.msg.split(" asks")[0] for m in found] == ["RELAY_PROVIDERS['openai']"]
    assert "responses-relay[server]" in str(found[0].hint)
    with pytest.raises(ImproperlyConfigured, match=r"responses-relay\[server\]"):
        upstream_ws.make_upstream(app_settings.provider("openai"))
    assert upstream_ws.make_upstream(app_settings.provider("sim")).base == upstream_ws.EMBEDDED_BASE_URL
    settings.RELAY_PROVIDERS = {}
    settings.RELAY_UPSTREAM_TRANSPORT = "websocket"
    settings.RELAY_UPSTREAM_BASE_URL = "https://api.openai.com/v1"
    assert [m.msg.split(" asks")[0] for m in checks.run_checks() if m.id == "responses_app.E008"] == [
        "RELAY_UPSTREAM_TRANSPORT"]


def test_every_provider_key_is_masked(settings: Any) -> None:
    settings.RELAY_PROVIDERS = TWO
    assert "sk-openai-secret-0001" in credentials.known()
    assert "sk-openai-secret-0001" not in credentials.masked("echoed: Bearer sk-openai-secret-0001")


# --- the door -----------------------------------------------------------------------------------------

def test_the_door_records_the_provider_and_what_it_can_do(settings: Any, owner: Any) -> None:
    settings.RELAY_PROVIDERS = TWO
    openai = submission.submit(user=owner, data={"input": "Hi", "model": "gpt-5"}).request
    local = submission.submit(user=owner, data={"input": "Hi", "model": "llama3.2"}).request
    assert (openai.provider, local.provider) == ("openai", "local")
    assert openai.params["background"] is True and local.params["background"] is False
    body = build_body(local)
    assert body["store"] is False and "background" not in body
    assert build_body(openai)["store"] is True and build_body(openai)["background"] is True


def test_a_websocket_provider_streams_in_the_foreground_unless_asked(settings: Any, owner: Any) -> None:
    """WebSocket mode has no background mode: by default its requests go over the socket, in the
    foreground; one that asks for background is POSTed over HTTP (upstream/websocket.py) and may have it."""
    settings.RELAY_PROVIDERS = {"openai": {**TWO["openai"], "transport": "websocket"}}
    plain = submission.submit(user=owner, data={"input": "Hi", "model": "gpt-5"}).request
    asked = submission.submit(user=owner, data={"input": "Hi", "model": "gpt-5", "background": True}).request
    assert (plain.params["background"], asked.params["background"]) == (False, True)


def test_a_model_no_provider_serves_is_refused_with_a_clear_message(settings: Any, owner: Any) -> None:
    settings.RELAY_PROVIDERS = TWO
    with pytest.raises(submission.Refused) as refused:
        submission.submit(user=owner, data={"input": "Hi", "model": "sim-text"})
    assert refused.value.status == 400 and refused.value.code == "model_not_served"
    assert "gpt-5" in refused.value.message and "llama3.2" in refused.value.message
    response = client_for(owner).post(reverse("responses_app:api-requests"), {"input": "Hi", "model": "claude"},
                                      content_type="application/json")
    assert response.status_code == 400 and "No provider serves the model 'claude'" in response.json()["error"]
    assert not ResponseRequest.objects.exists(), "nothing is stored for a refused request"


# --- the picker ---------------------------------------------------------------------------------------

def test_the_picker_groups_models_by_provider(settings: Any, owner: Any) -> None:
    settings.RELAY_PROVIDERS = TWO
    html = client_for(owner).get("/").content.decode()
    groups = re.findall(r'<optgroup label="([^"]*)">(.*?)</optgroup>', html, re.S)
    assert [(label, re.findall(r'<option value="([^"]+)"', body)) for label, body in groups] == [
        ("OpenAI", ["gpt-5", "gpt-5-mini"]), ("On this machine", ["llama3.2"])]
    assert "sk-openai-secret-0001" not in html


def test_the_picker_keeps_one_plain_list_without_providers(owner: Any) -> None:
    html = client_for(owner).get("/").content.decode()
    assert "<optgroup" not in html and '<option value="sim-text"' in html

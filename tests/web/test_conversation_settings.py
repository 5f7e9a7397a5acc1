"""A conversation's settings (turn_settings.py, web/conversation_settings.py): saved by its owner only,
validated in words, sent upstream with every new turn (Regenerate and Continue included) and only
what is set; staff presets copied in; the composer's model picker with each model's words."""

from __future__ import annotations

import re
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from responses_app import selectors, turn_settings
from responses_app.models import Conversation, Preset, ResponseRequest
from responses_app.relay.bodies import build_body
from responses_app.web import model_choices
from tests.web.test_continue import continue_url, stopped_turn
from tests.web.test_pages import client_for, make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]

SETTINGS = {"instructions": "Answer like a pirate.", "temperature": "0.4", "reasoning_effort": "high",
            "max_output_tokens": "300"}


def settings_url(conversation_id: Any) -> str:
    return reverse("responses_app:conversation-settings", args=[conversation_id])


def send(client: Client, conversation_id: Any, text: str = "Hi") -> ResponseRequest:
    response = client.post(reverse("responses_app:chat", args=[conversation_id]),
                           {"input": text, "model": "sim-text", "client_request_id": f"k-{text}"})
    assert response.status_code == 302, response.content[:400]
    return ResponseRequest.objects.filter(conversation_id=conversation_id).order_by("-created").first()  # type: ignore[return-value]


def body_of(request: ResponseRequest) -> dict[str, Any]:
    return build_body(selectors.request_get(request_id=request.pk))  # type: ignore[arg-type]


def test_saved_settings_go_upstream_with_the_next_turn_and_are_recorded(owner: Any) -> None:
    turn = make_turn(owner)
    client = client_for(owner)
    response = client.post(settings_url(turn.conversation_id), SETTINGS)
    assert response.status_code == 302 and response["Location"].endswith("#settings")
    conversation = Conversation.objects.get(pk=turn.conversation_id)
    assert turn_settings.values_of(conversation) == {"instructions": "Answer like a pirate.", "temperature": 0.4,
                                                     "reasoning_effort": "high", "max_output_tokens": 300}
    request = send(client, turn.conversation_id)
    body = body_of(request)
    assert body["instructions"] == "Answer like a pirate."
    assert body["temperature"] == 0.4 and body["reasoning"] == {"effort": "high"}
    assert body["max_output_tokens"] == 300
    # the turn's own params record what was sent (the admin shows them)
    assert request.params["temperature"] == 0.4 and request.params["instructions"] == "Answer like a pirate."
    assert request.params[turn_settings.APPLIED] == ["instructions", "max_output_tokens", "reasoning", "temperature"]


def test_nothing_set_sends_nothing(owner: Any) -> None:
    turn = make_turn(owner)
    body = body_of(send(client_for(owner), turn.conversation_id))
    assert not {"instructions", "temperature", "reasoning", "max_output_tokens"} & body.keys()


def test_a_cleared_setting_is_no_longer_sent_and_zero_is_a_temperature(owner: Any) -> None:
    turn = make_turn(owner)
    client = client_for(owner)
    client.post(settings_url(turn.conversation_id), SETTINGS)
    client.post(settings_url(turn.conversation_id), {"temperature": "0", "instructions": "", "reasoning_effort": "",
                                                     "max_output_tokens": ""})
    body = body_of(send(client, turn.conversation_id))
    assert body["temperature"] == 0.0
    assert not {"instructions", "reasoning", "max_output_tokens"} & body.keys()


@pytest.mark.parametrize(("field", "value", "words"), [
    ("temperature", "2.5", "Temperature takes a number from 0 to 2"),
    ("temperature", "-0.1", "Temperature takes a number from 0 to 2"),
    ("temperature", "warm", "Temperature takes a number from 0 to 2"),
    ("max_output_tokens", "0", "Maximum length takes a whole number of tokens from 1"),
    ("max_output_tokens", "999999", "Maximum length takes a whole number of tokens from 1 to 8,192"),
    ("reasoning_effort", "extreme", "Choose low, medium, high or the model’s default"),
    ("instructions", "x" * 4001, "Instructions take at most 4,000 characters"),
])
def test_a_refused_value_is_worded_and_nothing_is_saved(owner: Any, field: str, value: str, words: str) -> None:
    turn = make_turn(owner)
    response = client_for(owner).post(settings_url(turn.conversation_id), {**SETTINGS, field: value})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'role="alert"' in html
    assert re.search(rf'id="settings-{field}"[^>]*aria-invalid="true"|aria-invalid="true"[^>]*id="settings-{field}"',
                     html), "the refused field is marked"
    errors = re.search(r'id="settings-errors"[^>]*>(.*?)</div>', html, re.S)
    assert errors and words in errors.group(1)
    shown = re.sub(r'data-field="[^"]*"', "", errors.group(1))
    assert "RELAY_" not in shown and "max_output_tokens" not in shown, "no setting's or parameter's name"
    conversation = Conversation.objects.get(pk=turn.conversation_id)
    assert turn_settings.upstream_params(conversation) == {}, "nothing saved"


def test_the_instructions_limit_follows_its_setting(owner: Any, settings: Any) -> None:
    settings.RELAY_INSTRUCTIONS_MAX_CHARS = 10
    turn = make_turn(owner)
    response = client_for(owner).post(settings_url(turn.conversation_id), {"instructions": "x" * 11})
    assert response.status_code == 400 and "at most 10 characters" in response.content.decode()


def test_only_the_owner_changes_settings(owner: Any, teammate: Any, staff: Any) -> None:
    turn = make_turn(owner)
    preset = Preset.objects.create(name="Terse", temperature=0.1)
    for user, status in ((teammate, 404), (staff, 403)):
        client = client_for(user)
        assert client.post(settings_url(turn.conversation_id), SETTINGS).status_code == status
        assert client.post(reverse("responses_app:conversation-preset", args=[turn.conversation_id]),
                           {"preset": preset.pk}).status_code == status
    assert Client().post(settings_url(turn.conversation_id), SETTINGS).status_code == 302  # to log in
    assert turn_settings.upstream_params(Conversation.objects.get(pk=turn.conversation_id)) == {}
    page = client_for(staff).get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    assert "data-settings-form" not in page, "a staff reader sees no Settings panel"


def test_saving_needs_the_csrf_token(owner: Any) -> None:
    turn = make_turn(owner)
    client = client_for(owner, enforce_csrf_checks=True)
    assert client.post(settings_url(turn.conversation_id), SETTINGS).status_code == 403
    page = client.get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    token = re.search(r'data-settings-form>\s*<input type="hidden" name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token, "the panel's form carries its token"
    assert client.post(settings_url(turn.conversation_id), {**SETTINGS, "csrfmiddlewaretoken": token.group(1)}
                       ).status_code == 302


def test_the_chat_page_shows_the_panel_with_the_values_and_the_presets(owner: Any) -> None:
    turn = make_turn(owner)
    Preset.objects.create(name="Concise", description="Short answers.", temperature=0.3)
    client = client_for(owner)
    client.post(settings_url(turn.conversation_id), SETTINGS)
    html = client.get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    assert 'id="settings"' in html and "Answer like a pirate." in html and 'value="0.4"' in html
    assert "Concise — Short answers." in html and "Apply preset" in html
    assert "(instructions, temperature, effort, length)" in html
    own = client.get(settings_url(turn.conversation_id))
    assert own.status_code == 200 and "Answer like a pirate." in own.content.decode()


def test_a_preset_is_copied_in_and_its_later_edits_change_nothing(owner: Any) -> None:
    turn = make_turn(owner)
    preset = Preset.objects.create(name="Careful", instructions="Think first.", reasoning_effort="high",
                                   max_output_tokens=500)
    client = client_for(owner)
    client.post(settings_url(turn.conversation_id), SETTINGS)
    url = reverse("responses_app:conversation-preset", args=[turn.conversation_id])
    assert client.post(url, {"preset": preset.pk}).status_code == 302
    conversation = Conversation.objects.get(pk=turn.conversation_id)
    assert turn_settings.values_of(conversation) == {"instructions": "Think first.", "temperature": None,
                                                     "reasoning_effort": "high", "max_output_tokens": 500}
    Preset.objects.filter(pk=preset.pk).update(instructions="Changed.", temperature=1.5)
    body = body_of(send(client, turn.conversation_id))
    assert body["instructions"] == "Think first." and "temperature" not in body
    assert client.post(url, {"preset": "999"}).status_code == 404
    assert client.post(url, {"preset": "x"}).status_code == 404


def test_regenerate_and_continue_send_the_conversations_current_settings(owner: Any) -> None:
    client = client_for(owner)
    turn = stopped_turn(owner)
    client.post(settings_url(turn.conversation_id), {**SETTINGS, "max_output_tokens": "50"})
    regenerated = reverse("responses_app:chat-regenerate", args=[turn.conversation_id, turn.pk])
    assert client.post(regenerated, {"client_request_id": "r1"}).status_code == 302
    again = ResponseRequest.objects.get(client_request_id="r1")
    assert body_of(again)["max_output_tokens"] == 50 and body_of(again)["instructions"] == "Answer like a pirate."
    # the settings change; Regenerate of that turn sends the new ones, not the ones it was sent with
    client.post(settings_url(turn.conversation_id), {"temperature": "1.2"})
    assert client.post(reverse("responses_app:chat-regenerate", args=[turn.conversation_id, again.pk]),
                       {"client_request_id": "r2"}).status_code == 302
    body = body_of(ResponseRequest.objects.get(client_request_id="r2"))
    assert body["temperature"] == 1.2 and not {"instructions", "reasoning", "max_output_tokens"} & body.keys()
    latest = stopped_turn(owner)
    client.post(settings_url(latest.conversation_id), {"instructions": "Keep going.", "max_output_tokens": "40"})
    assert client.post(continue_url(latest), {"client_request_id": "c1"}).status_code == 302
    body = body_of(ResponseRequest.objects.get(client_request_id="c1"))
    assert body["instructions"] == "Keep going." and body["max_output_tokens"] == 40


def test_the_composer_shows_each_models_words(owner: Any) -> None:
    turn = make_turn(owner)
    html = client_for(owner).get(reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    words = model_choices.BUILT_IN["sim-text"]
    assert 'aria-describedby="composer-model-description"' in html
    assert re.search(r'id="composer-model-description"[^>]*>' + re.escape(words) + "<", html)
    rich = model_choices.BUILT_IN["sim-rich"]
    assert f'<option value="sim-rich" title="{rich}" data-description="{rich}">' in html


def test_bootstrap_demo_adds_its_presets_once(settings: Any) -> None:
    settings.DEVELOPMENT = True
    out = StringIO()
    call_command("bootstrap_demo", stdout=out)
    call_command("bootstrap_demo", stdout=StringIO())
    assert list(Preset.objects.values_list("name", flat=True)) == ["Careful reasoning", "Concise"]
    assert "Added the presets" in out.getvalue()


def test_staff_with_the_permissions_edit_presets_in_the_admin(staff: Any) -> None:
    from django.contrib.auth.models import Permission

    editor = get_user_model().objects.create_user("editor", is_staff=True)
    client = client_for(editor)
    add = reverse("admin:responses_app_preset_add")
    assert client.get(add).status_code == 403
    editor.user_permissions.add(*Permission.objects.filter(codename__in=["add_preset", "change_preset",
                                                                        "view_preset"]))
    client = client_for(get_user_model().objects.get(pk=editor.pk))
    refused = client.post(add, {"name": "Hot", "temperature": "3"})
    assert refused.status_code == 200 and "Temperature takes a number from 0 to 2" in refused.content.decode()
    assert client.post(add, {"name": "Hot", "temperature": "1.8", "description": "Varied."}).status_code == 302
    assert Preset.objects.get(name="Hot").temperature == 1.8

"""A preset's model (turn_settings.Preset.model): staff choose it in the admin among the models the
site offers (admin.PresetForm), a message sent with the preset goes to it unless the person chose
a model (turn_settings.model_for, from the door), and the composer offers the presets beside the
model picker. Personas: an owner, staff with the preset permissions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from responses_app import submission, turn_settings
from responses_app.models import Preset, ResponseRequest
from tests.web.test_pages import client_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]

ADD = "admin:responses_app_preset_add"


def editor() -> Client:
    user = get_user_model().objects.create_user("editor", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["add_preset", "change_preset", "view_preset"]))
    return client_for(get_user_model().objects.get(pk=user.pk))


def api(client: Client, body: dict[str, Any]) -> Any:
    return client.post(reverse("responses_app:api-requests"), json.dumps(body), content_type="application/json")


def test_the_admin_offers_the_sites_models_and_refuses_another(settings: Any) -> None:
    client = editor()
    form = client.get(reverse(ADD)).content.decode()
    assert '<select name="model"' in form and '<option value="sim-reasoning">sim-reasoning</option>' in form
    assert '<option value="" selected>None: the model the person chose</option>' in form
    refused = client.post(reverse(ADD), {"name": "Odd", "model": "gpt-made-up"})
    assert refused.status_code == 200
    assert "gpt-made-up is not a model this site offers: choose one of the list, or leave it empty." in (
        refused.content.decode())
    assert not Preset.objects.filter(name="Odd").exists()
    assert client.post(reverse(ADD), {"name": "Thinker", "model": "sim-reasoning"}).status_code == 302
    assert client.post(reverse(ADD), {"name": "Anything"}).status_code == 302
    assert dict(Preset.objects.values_list("name", "model")) == {"Thinker": "sim-reasoning", "Anything": ""}
    settings.RELAY_ALLOWED_MODELS = ["sim-text", "sim-rich"]  # the site stops offering sim-reasoning
    thinker = Preset.objects.get(name="Thinker")
    change = reverse("admin:responses_app_preset_change", args=[thinker.pk])
    page = client.get(change).content.decode()
    assert '<option value="sim-reasoning" selected>sim-reasoning (no longer offered)</option>' in page
    assert '<option value="sim-citations">' not in page
    kept = client.post(change, {"name": "Thinker", "model": "sim-reasoning"})
    assert kept.status_code == 200 and "sim-reasoning is not a model this site offers" in kept.content.decode()
    assert client.post(change, {"name": "Thinker", "model": "sim-rich"}).status_code == 302
    assert Preset.objects.get(pk=thinker.pk).model == "sim-rich"


def test_the_model_field_refuses_what_no_model_id_can_be() -> None:
    for bad in ("two words", "nul\x00"):
        with pytest.raises(ValidationError, match="no spaces or control characters"):
            Preset(name="Bad", model=bad).full_clean()
    Preset(name="Good", model="sim-text").full_clean()
    Preset(name="None").full_clean()


def test_a_message_with_a_preset_and_no_model_goes_to_the_presets_model(owner: Any) -> None:
    preset = Preset.objects.create(name="Careful", model="sim-reasoning", instructions="Think first.",
                                   reasoning_effort="high")
    done = submission.submit(user=owner, data={"input": "Why is the sky blue?", "preset": str(preset.pk)})
    request = done.request
    assert request.model == "sim-reasoning"
    assert request.params["instructions"] == "Think first." and request.params["reasoning"] == {"effort": "high"}
    conversation = request.conversation
    assert conversation is not None
    conversation.refresh_from_db()
    assert turn_settings.values_of(conversation)["instructions"] == "Think first.", "copied in, as Apply preset"
    chosen = submission.submit(user=owner, data={"input": "Again", "model": "sim-rich", "preset": preset.pk,
                                                 "conversation": str(conversation.pk)})
    assert chosen.request.model == "sim-rich", "the person's choice wins"
    assert turn_settings.model_for(chosen="", preset=None) == ""


def test_a_preset_without_a_model_keeps_the_persons_choice_and_needs_one(owner: Any) -> None:
    plain = Preset.objects.create(name="Plain", temperature=0.2)
    client = client_for(owner)
    refused = api(client, {"input": "Hello", "preset": plain.pk})
    assert refused.status_code == 400 and refused.json()["errors"] == {"model": ["Choose a model."]}
    sent = api(client, {"input": "Hello", "preset": plain.pk, "model": "sim-long"})
    assert sent.status_code == 201, sent.content
    request = ResponseRequest.objects.get(pk=sent.json()["id"])
    assert request.model == "sim-long" and request.params["temperature"] == 0.2
    assert api(client, {"input": "Hello"}).json()["errors"] == {"model": ["This field is required."]}


def test_an_unknown_preset_or_a_preset_model_the_server_refuses_is_a_clear_400(owner: Any, settings: Any) -> None:
    client = client_for(owner)
    gone = api(client, {"input": "Hello", "preset": 999, "model": "sim-text"})
    assert gone.status_code == 400 and gone.json()["errors"] == {"preset": ["No such preset: choose one of the list."]}
    assert api(client, {"input": "Hello", "preset": "x", "model": "sim-text"}).json()["errors"] == {
        "preset": ["must be a positive integer."]}
    preset = Preset.objects.create(name="Old", model="sim-reasoning")
    settings.RELAY_ALLOWED_MODELS = ["sim-text"]  # saved before the site stopped offering it: the door checks again
    refused = api(client, {"input": "Hello", "preset": preset.pk})
    assert refused.status_code == 400
    assert refused.json()["errors"]["model"] == ["Unknown model 'sim-reasoning': this server allows sim-text."]
    assert not ResponseRequest.objects.exists()


def test_the_composer_offers_the_presets_with_their_models_and_works_without_script(owner: Any) -> None:
    client = client_for(owner)
    assert 'data-preset-select' not in client.get(reverse("responses_app:conversations")).content.decode()
    careful = Preset.objects.create(name="Careful", description="Thinks first.", model="sim-reasoning",
                                    instructions="Think first.")
    Preset.objects.create(name="Any model", temperature=0.5)
    html = client.get(reverse("responses_app:conversations")).content.decode()
    assert '<select name="preset" id="composer-preset" aria-describedby="composer-preset-help" data-preset-select>' \
        in html
    assert '<option value="">No preset</option>' in html
    assert (f'<option value="{careful.pk}" data-model="sim-reasoning" title="Thinks first.">Careful</option>'
            in html)
    assert '<span class="sr-only" id="composer-preset-help">' in html
    # without the script: the form posts the preset with the picker's model, which wins
    response = client.post(reverse("responses_app:conversation-new"), {
        "input": "Plain post", "model": "sim-text", "preset": str(careful.pk), "client_request_id": "np-1"})
    assert response.status_code == 302, response.content[:300]
    request = ResponseRequest.objects.get(client_request_id="np-1")
    assert request.model == "sim-text" and request.params["instructions"] == "Think first."
    refused = client.post(reverse("responses_app:conversation-new"), {
        "input": "", "model": "sim-text", "preset": str(careful.pk), "client_request_id": "np-2"})
    assert refused.status_code == 400
    assert f'<option value="{careful.pk}" data-model="sim-reasoning" title="Thinks first." selected>' in (
        refused.content.decode()), "a refused send keeps the preset chosen"

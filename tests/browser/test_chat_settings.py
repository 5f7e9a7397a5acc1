"""A conversation's Settings panel and presets, and the model's words in the composer, in Chromium at
desktop and phone widths: what is saved reaches the turn's request (its params in the database, and
the simulator's answer says back the instructions), a preset applied fills the form, the words under
the model picker follow the choice; axe finds nothing serious in light or dark."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from responses_app.web.model_choices import BUILT_IN

from .axe import assert_accessible
from .conftest import RelayServer
from .test_chat import submit_first_prompt, wait_completed
from .test_chat_page import FAST, WIDTHS, answer_text, no_console_errors, send_reply, sized

pytestmark = pytest.mark.browser


def params_of(server: RelayServer, request_id: str) -> dict[str, Any]:
    rows = server.query("SELECT params FROM responses_app_responserequest WHERE id = ?", request_id.replace("-", ""))
    return dict(json.loads(rows[0][0]))


def open_settings(page: Page) -> None:
    panel = page.locator("#settings")
    if panel.get_attribute("open") is None:
        page.click("#settings > summary")
    expect(page.locator("#settings-instructions")).to_be_visible()


def accessible_both_ways(page: Page) -> None:
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
        assert_accessible(page)
    page.emulate_media(color_scheme="light")


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_settings_saved_in_the_panel_go_with_the_next_turn(sessions: Any, relay_server: RelayServer,
                                                           width: int) -> None:
    page = sized(sessions("alice"), width)
    first = submit_first_prompt(page, "Hello there", metadata=FAST)
    wait_completed(page, first)
    open_settings(page)
    page.fill("#settings-instructions", "Answer like a pirate.")
    page.fill("#settings-temperature", "0.3")
    page.select_option("#settings-reasoning_effort", "low")
    accessible_both_ways(page)
    page.click("#settings button:has-text('Save settings')")
    page.wait_for_url("**/#settings")
    expect(page.locator("#settings > summary")).to_contain_text("(instructions, temperature, effort)")
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), "no sideways scrolling"
    reply = send_reply(page, "Tell me about ships", metadata=FAST)
    wait_completed(page, reply)
    params = params_of(relay_server, reply)
    assert params["instructions"] == "Answer like a pirate." and params["temperature"] == 0.3
    assert params["reasoning"] == {"effort": "low"} and "max_output_tokens" not in params
    assert answer_text(page, reply).startswith("Instructions received: “Answer like a pirate.”")
    assert "instructions" not in params_of(relay_server, first), "the turn before had none"
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_refused_value_is_worded_beside_the_form(sessions: Any, width: int) -> None:
    page = sized(sessions("bob"), width)
    first = submit_first_prompt(page, "Hello", metadata=FAST)
    wait_completed(page, first)
    open_settings(page)
    page.evaluate("document.getElementById('settings-temperature').removeAttribute('max')")
    page.fill("#settings-temperature", "3")
    page.click("#settings button:has-text('Save settings')")
    expect(page.locator("#settings-errors")).to_contain_text("Temperature takes a number from 0 to 2")
    expect(page.locator("#settings-temperature")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#settings-temperature")).to_have_value("3")
    accessible_both_ways(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_apply_preset_fills_the_settings(sessions: Any, relay_server: RelayServer, width: int) -> None:
    name = f"Brief {width}"
    relay_server.query("INSERT INTO responses_app_preset (name, description, instructions, temperature, "
                       "reasoning_effort, max_output_tokens) VALUES (?, ?, ?, ?, ?, ?)",
                       name, "Short answers.", "Be brief.", 0.2, "medium", 6)
    page = sized(sessions("alice"), width)
    first = submit_first_prompt(page, "Hi", metadata=FAST)
    wait_completed(page, first)
    open_settings(page)
    page.select_option("#settings-preset", label=f"{name} — Short answers.")
    page.click("#settings button:has-text('Apply preset')")
    page.wait_for_url("**/#settings")
    open_settings(page)
    expect(page.locator("#settings-instructions")).to_have_value("Be brief.")
    expect(page.locator("#settings-temperature")).to_have_value("0.2")
    expect(page.locator("#settings-reasoning_effort")).to_have_value("medium")
    expect(page.locator("#settings-max_output_tokens")).to_have_value("6")
    reply = send_reply(page, "And again", metadata=FAST)
    expect(page.locator(f'article.turn[data-request-id="{reply}"] [data-badge]')).to_have_attribute(
        "data-badge", "incomplete", timeout=60_000)
    params = params_of(relay_server, reply)
    assert params["max_output_tokens"] == 6 and params["instructions"] == "Be brief."
    no_console_errors(page)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_model_pickers_words_follow_the_choice(sessions: Any, width: int) -> None:
    page = sized(sessions("bob"), width)
    page.goto("/")
    words = page.locator("#composer-model-description")
    expect(page.locator("#composer-model")).to_have_attribute("aria-describedby", "composer-model-description")
    expect(words).to_have_text(BUILT_IN["sim-text"])
    page.select_option("#composer-model", "sim-rich")
    expect(words).to_have_text(BUILT_IN["sim-rich"])
    assert page.locator("#composer-model option[value=sim-rich]").get_attribute("title") == BUILT_IN["sim-rich"]
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), "no sideways scrolling"
    box = words.bounding_box()
    assert box is not None and box["width"] > 0 and box["x"] + box["width"] <= width
    accessible_both_ways(page)
    no_console_errors(page)


def model_and_params(server: RelayServer, request_id: str) -> tuple[str, dict[str, Any]]:
    rows = server.query("SELECT model, params FROM responses_app_responserequest WHERE id = ?",
                        request_id.replace("-", ""))
    return rows[0][0], dict(json.loads(rows[0][1]))


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_preset_in_the_composer_picks_its_model_and_goes_with_the_message(sessions: Any, relay_server: RelayServer,
                                                                          width: int) -> None:
    careful, loose = f"Deliberate {width}", f"Loose {width}"
    insert = ("INSERT INTO responses_app_preset (name, description, instructions, temperature, reasoning_effort, "
              "max_output_tokens, model) VALUES (?, ?, ?, ?, ?, ?, ?)")
    relay_server.query(insert, careful, "Thinks first.", "Take your time.", None, "high", None, "sim-reasoning")
    relay_server.query(insert, loose, "", "", 0.9, "", None, "")
    page = sized(sessions("alice"), width)
    page.goto("/")
    presets, models = page.locator("#composer-preset"), page.locator("#composer-model")
    expect(presets).to_have_value("")
    expect(models).to_have_value("sim-text")
    page.select_option("#composer-preset", label=careful)
    expect(models).to_have_value("sim-reasoning")
    expect(page.locator("#composer-model-description")).to_have_text(BUILT_IN["sim-reasoning"])
    page.select_option("#composer-preset", label=loose)  # it names no model: the one chosen stays
    expect(models).to_have_value("sim-reasoning")
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), "no sideways scrolling"
    box = presets.bounding_box()
    assert box is not None and box["width"] > 0 and box["x"] + box["width"] <= width
    accessible_both_ways(page)
    # the first message posts the form (no script needed): the preset's settings and model go with it
    page.select_option("#composer-preset", label=careful)
    page.click("#composer details.advanced > summary")
    page.fill("#composer textarea[name=metadata]", json.dumps(FAST))
    page.fill("#composer textarea[name=input]", "Why is the sea salty?")
    page.click("#composer button[type=submit]")
    page.wait_for_url(re.compile(r"/c/[0-9a-f-]+/"))
    first = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    wait_completed(page, first)
    model, params = model_and_params(relay_server, first)
    assert model == "sim-reasoning" and params["instructions"] == "Take your time."
    assert params["reasoning"] == {"effort": "high"}
    expect(presets).to_have_value("")  # applied: the conversation holds its settings now
    expect(models).to_have_value("sim-reasoning")  # the conversation's last model
    # a reply (composer.js sends it): a preset without a model keeps the person's choice
    page.select_option("#composer-preset", label=loose)
    page.select_option("#composer-model", "sim-text")
    page.fill("#composer textarea[name=input]", "And the Dead Sea?")
    page.click("#composer button[type=submit]")
    expect(page.locator("article.turn")).to_have_count(2)
    reply = str(page.locator("article.turn").last.get_attribute("data-request-id"))
    wait_completed(page, reply)
    model, params = model_and_params(relay_server, reply)
    assert model == "sim-text" and params["temperature"] == 0.9
    assert "instructions" not in params and "reasoning" not in params, "the preset's settings replaced the others"
    expect(presets).to_have_value("")
    accessible_both_ways(page)
    no_console_errors(page)

"""The simulator against the Open Responses specification, over real loopback HTTP and WebSocket
mode: every scenario's events and Response objects validate with the specification's models
(`openresponses-types`), and the checks of the specification's compliance suite pass."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.simulator.helpers import AUTH, SCENARIO_NAMES, body, get, post_raw, stream_raw
from tests.simulator.spec import (
    Extensions,
    sse_events,
    validate_event,
    validate_response,
    validate_websocket_error,
)

pytest.importorskip("openresponses_types")

# Scenarios whose output the specification covers whole: nothing may be set aside in them.
PURE = {"sim-text", "sim-long", "sim-rich", "sim-function", "sim-parallel-functions", "sim-reasoning",
        "sim-refusal", "sim-incomplete", "sim-failed", "sim-error"}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a location",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "The city and state"}},
        "required": ["location"],
    },
}
TERMINALS = {"response.completed", "response.failed", "response.incomplete"}


def conformant_stream(data: bytes, found: Extensions) -> list[dict[str, Any]]:
    events = sse_events(data)
    assert events and events[-1]["type"] in TERMINALS
    for event in events:
        validate_event(event, found)
    return events


@pytest.mark.parametrize("model", SCENARIO_NAMES)
def test_every_scenario_streams_what_the_specification_accepts(simulator_url: str, model: str) -> None:
    found = Extensions()
    events = conformant_stream(stream_raw(simulator_url, body(model, tools=[WEATHER])), found)
    final = events[-1]["response"]
    assert final["tools"][0]["strict"] is True and final["tools"][0]["description"]
    assert final["presence_penalty"] == 0.0 and final["frequency_penalty"] == 0.0
    retrieved = get(f"{simulator_url}/responses/{final['id']}")
    assert retrieved.status_code == 200
    validate_response(retrieved.json(), found)
    assert retrieved.json() == final
    answer = post_raw(simulator_url, body(model, stream=False, tools=[WEATHER], input="Again, please."))
    assert answer.status_code == 200
    validate_response(answer.json(), found)
    if model in PURE:
        assert found.total() == 0, found.seen
    else:
        assert found.seen["item"], "a hosted-tool scenario sets its tool's item aside"


@pytest.mark.parametrize("model", ["sim-text", "sim-function", "sim-reasoning", "sim-citations"])
def test_background_responses_their_resume_and_cancel_validate(simulator_url: str, model: str) -> None:
    found = Extensions()
    events = conformant_stream(stream_raw(simulator_url, body(model, background=True)), found)
    assert [e["type"] for e in events[:3]] == ["response.created", "response.queued", "response.in_progress"]
    resumed = get(f"{simulator_url}/responses/{events[0]['response']['id']}",
                  params={"stream": "true", "starting_after": "2"}).content
    assert conformant_stream(resumed, found) == events[3:]
    queued = post_raw(simulator_url, body(model, stream=False, background=True, input="Later.",
                                          metadata={"sim.tokens_per_s": "5"}))
    validate_response(queued.json(), found)
    cancelled = httpx.post(f"{simulator_url}/responses/{queued.json()['id']}/cancel", headers=AUTH)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    validate_response(cancelled.json(), found)


def test_a_tool_round_validates(simulator_url: str) -> None:
    found = Extensions()
    first = conformant_stream(stream_raw(simulator_url, body("sim-function", tools=[WEATHER])), found)
    call = next(i for i in first[-1]["response"]["output"] if i["type"] == "function_call")
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": '{"temp": 21}'}
    follow = body("sim-function", tools=[WEATHER], input=[output],
                  previous_response_id=first[-1]["response"]["id"])
    events = conformant_stream(stream_raw(simulator_url, follow), found)
    assert events[-1]["response"]["output"][0]["type"] == "message" and found.total() == 0


@pytest.mark.parametrize("model", SCENARIO_NAMES)
async def test_every_scenario_in_websocket_mode_sends_what_the_specification_accepts(
    simulator_url: str, model: str
) -> None:
    found = Extensions()
    payload = {"type": "response.create", **body(model, tools=[WEATHER])}
    payload.pop("stream")
    async with connect(simulator_url.replace("http://", "ws://", 1) + "/responses",
                       additional_headers=AUTH) as ws:
        await ws.send(json.dumps({**payload, "stream_id": "lane"}))
        frames: list[dict[str, Any]] = []
        async with asyncio.timeout(20):
            while not frames or frames[-1]["type"] not in TERMINALS:
                frames.append(json.loads(await ws.recv()))
        refused = {**payload, "metadata": {**payload["metadata"], "sim.http_error": "429"}}
        await ws.send(json.dumps(refused))
        error = json.loads(await ws.recv())
    for frame in frames:
        assert frame["stream_id"] == "lane"
        validate_event(frame, found)
    assert (model in PURE) == (found.total() == 0)
    assert error["type"] == "error" and error["status"] == 429
    validate_websocket_error(error)


def test_bad_sampling_parameters_are_refused(simulator_url: str) -> None:
    for key in ("presence_penalty", "frequency_penalty", "temperature", "top_p"):
        answer = post_raw(simulator_url, {**body("sim-text"), key: "high"})
        assert answer.status_code == 400 and answer.json()["error"]["param"] == key


# --- the checks of the specification's compliance suite, request for request ----------------------

def _message(role: str, content: Any) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": content}


HEART = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/"
         "PchI7wAAAABJRU5ErkJggg==")
SUITE: list[tuple[str, str, list[dict[str, Any]], bool, bool]] = [
    # (test, model, input, streaming, with the weather tool)
    ("basic-response", "sim-text", [_message("user", "Say hello in exactly 3 words.")], False, False),
    ("streaming-response", "sim-text", [_message("user", "Count from 1 to 5.")], True, False),
    ("system-prompt", "sim-text", [_message("system", "You are a pirate."), _message("user", "Say hello.")],
     False, False),
    ("tool-calling", "sim-function", [_message("user", "What's the weather like in San Francisco?")],
     False, True),
    ("tool-calling-streaming", "sim-function",
     [_message("user", "What's the weather like in San Francisco?")], True, True),
    ("image-input", "sim-text", [_message("user", [
        {"type": "input_text", "text": "What do you see in this image? Answer in one sentence."},
        {"type": "input_image", "image_url": HEART}])], False, False),
    ("multi-turn", "sim-text", [_message("user", "My name is Alice."),
                                _message("assistant", "Hello Alice! How can I help you today?"),
                                _message("user", "What is my name?")], False, False),
]


@pytest.mark.parametrize(("test", "model", "items", "streaming", "tool"), SUITE, ids=[s[0] for s in SUITE])
def test_the_compliance_suite(simulator_url: str, test: str, model: str, items: list[dict[str, Any]],
                              streaming: bool, tool: bool) -> None:
    request: dict[str, Any] = {"model": model, "input": items, "stream": streaming,
                               "metadata": {"sim.tokens_per_s": "0", "sim.seed": "3"}}
    if tool:
        request["tools"] = [{k: v for k, v in WEATHER.items()}]
    answer = post_raw(simulator_url, request)
    assert answer.status_code == 200, answer.text
    if streaming:
        events = conformant_stream(answer.content, Extensions())
        final = events[-1]["response"]
    else:
        final = answer.json()
    validate_response(final)
    assert final["output"], "the response has output items"
    kinds = [item["type"] for item in final["output"]]
    if tool:
        assert "function_call" in kinds
    else:
        assert final["status"] == "completed"
    if test == "tool-calling-streaming":
        types = [e["type"] for e in events]
        assert "response.function_call_arguments.delta" in types
        assert "response.function_call_arguments.done" in types
        for stage in ("added", "done"):
            assert any(e["type"] == f"response.output_item.{stage}" and e["item"]["type"] == "function_call"
                       for e in events)

"""The official openai SDK, a real independent client, against the standalone simulator."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.simulator.helpers import DEV_API_KEY, FAST, SCENARIO_NAMES, body, get, stream_raw, wait_until

COMPLETES = [m for m in SCENARIO_NAMES if m not in ("sim-failed", "sim-error", "sim-incomplete")]


@pytest.fixture(scope="module")
def client(simulator_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=simulator_url, api_key=DEV_API_KEY, max_retries=0)


def _strip_parsed(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_parsed(v) for k, v in value.items() if k not in ("parsed", "parsed_arguments")
        }
    if isinstance(value, list):
        return [_strip_parsed(v) for v in value]
    return value


@pytest.mark.parametrize("model", COMPLETES)
def test_sdk_streams_every_completing_scenario(client: openai.OpenAI, model: str) -> None:
    with client.responses.stream(model=model, input="Tell me something.", metadata=FAST) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert final.status == "completed" and final.model == model and final.output


@pytest.mark.parametrize("model", ["sim-failed", "sim-incomplete"])
def test_sdk_sees_the_terminal_event_of_unfinished_scenarios(
    client: openai.OpenAI, model: str
) -> None:
    with client.responses.stream(model=model, input="Tell me something.", metadata=FAST) as stream:
        events = list(stream)
        with pytest.raises(RuntimeError):
            stream.get_final_response()  # the helper only finishes on response.completed
    assert events[-1].type == f"response.{model.removeprefix('sim-')}"


def test_sdk_raises_on_the_error_event(client: openai.OpenAI) -> None:
    seen: list[str] = []
    with pytest.raises(openai.APIError, match="error occurred"):
        with client.responses.stream(model="sim-error", input="x", metadata=FAST) as stream:
            for event in stream:
                seen.append(event.type)
    assert "response.output_text.delta" in seen


@pytest.mark.parametrize("model", COMPLETES + ["sim-failed", "sim-incomplete", "sim-error"])
def test_sdk_final_response_equals_our_assembler(
    simulator_url: str, client: openai.OpenAI, model: str
) -> None:
    replay = pytest.importorskip("responses_app.streaming.replay")
    raw = stream_raw(simulator_url, body(model))
    result = replay.replay_bytes(raw)
    assert result.terminal and result.problems == []
    if model not in COMPLETES:
        assert result.status in ("failed", "incomplete", "error")
        return
    assert result.status == "completed"
    with client.responses.stream(model=model, input="Tell me something.", metadata=FAST) as stream:
        final = stream.get_final_response()
    assert result.response == _strip_parsed(final.to_dict(mode="json", exclude_unset=True))
    # byte-chunked feeding must not change the outcome
    assert replay.replay_bytes(raw, chunk_size=7).response == result.response


def test_non_stream_create(client: openai.OpenAI) -> None:
    response = client.responses.create(model="sim-text", input="Hi", metadata=FAST)
    assert response.status == "completed" and response.output_text
    assert client.responses.retrieve(response.id).output_text == response.output_text


def test_retrieve_resumes_a_background_stream(client: openai.OpenAI) -> None:
    meta = {**FAST, "sim.tokens": "200"}
    first: list[Any] = []
    stream = client.responses.create(
        model="sim-long", input="resume me", metadata=meta, background=True, stream=True
    )
    for event in stream:
        first.append(event)
        if event.sequence_number == 10:
            break
    stream.close()
    response_id = first[0].response.id
    assert first[0].response.status == "queued" and first[1].type == "response.queued"
    resumed = list(client.responses.retrieve(response_id, stream=True, starting_after=10))
    assert [e.sequence_number for e in resumed] == list(range(11, 11 + len(resumed)))
    assert resumed[-1].type == "response.completed"
    # the resumed events are exactly the tail of a full replay
    everything = list(client.responses.retrieve(response_id, stream=True))
    assert [e.to_dict() for e in everything[11:]] == [e.to_dict() for e in resumed]
    assert client.responses.retrieve(response_id).status == "completed"


def test_cancel_a_background_response(client: openai.OpenAI) -> None:
    created = client.responses.create(
        model="sim-long",
        input="slow",
        background=True,
        metadata={"sim.tokens_per_s": "20", "sim.seed": "11"},
    )
    assert created.status == "queued"
    cancelled = client.responses.cancel(created.id)
    assert cancelled.status == "cancelled"
    assert client.responses.retrieve(created.id).status == "cancelled"
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(
            client.responses.create(model="sim-text", input="x", metadata=FAST).id
        )


def test_previous_response_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(
            model="sim-text", input="x", previous_response_id="resp_nope", metadata=FAST
        )
    assert info.value.code == "previous_response_not_found"


def test_function_call_round_trip_with_parallel_calls(client: openai.OpenAI) -> None:
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
        {
            "type": "function",
            "name": "get_time",
            "description": "Local time",
            "parameters": {
                "type": "object",
                "properties": {"timezone": {"type": "string"}},
                "required": ["timezone"],
            },
        },
    ]
    with client.responses.stream(
        model="sim-parallel-functions", input="Weather and time?", tools=tools, metadata=FAST
    ) as stream:
        first = stream.get_final_response()
    calls = [item for item in first.output if item.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather", "get_time"]
    assert len({c.call_id for c in calls}) == 2
    outputs = [
        {"type": "function_call_output", "call_id": c.call_id, "output": f"result-of-{c.name}"}
        for c in calls
    ]
    with client.responses.stream(
        model="sim-parallel-functions",
        input=outputs,
        tools=tools,
        previous_response_id=first.id,
        metadata=FAST,
    ) as stream:
        second = stream.get_final_response()
    assert second.previous_response_id == first.id
    assert (
        "result-of-get_weather" in second.output_text and "result-of-get_time" in second.output_text
    )
    with pytest.raises(openai.BadRequestError):
        client.responses.create(
            model="sim-function",
            previous_response_id=first.id,
            metadata=FAST,
            input=[{"type": "function_call_output", "call_id": "call_unknown", "output": "x"}],
        )


def test_background_create_keeps_running_without_a_client(
    simulator_url: str, client: openai.OpenAI
) -> None:
    created = client.responses.create(model="sim-text", input="bg", background=True, metadata=FAST)
    done = wait_until(
        lambda: (r := client.responses.retrieve(created.id)).status == "completed" and r
    )
    assert done.output_text
    r = get(f"{simulator_url}/responses/{created.id}")
    assert r.json()["status"] == "completed"

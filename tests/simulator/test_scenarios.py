"""Every scenario over raw HTTP: ordering invariants, determinism, non-stream and retrieve."""

from __future__ import annotations

import pytest

from tests.simulator.helpers import (
    SCENARIO_NAMES,
    body,
    check_invariants,
    get,
    parse,
    post_raw,
    stream_raw,
)

ID_PREFIX = {
    "message": "msg_",
    "function_call": "fc_",
    "reasoning": "rs_",
    "web_search_call": "ws_",
    "file_search_call": "fs_",
    "code_interpreter_call": "ci_",
    "image_generation_call": "ig_",
    "mcp_call": "mcp_",
    "mcp_list_tools": "mcpl_",
    "mcp_approval_request": "mcpr_",
}


@pytest.mark.parametrize("model", SCENARIO_NAMES)
def test_every_scenario_obeys_the_ordering_rules(simulator_url: str, model: str) -> None:
    events = parse(stream_raw(simulator_url, body(model)))
    check_invariants(events)
    response = events[-1]["response"]
    assert response["id"].startswith("resp_") and response["model"] == model
    for event in events:
        if event["type"] == "response.output_item.added":
            assert event["item"]["id"].startswith(ID_PREFIX[event["item"]["type"]])


def test_scenario_terminal_states(simulator_url: str) -> None:
    def last(model: str) -> dict:
        return parse(stream_raw(simulator_url, body(model)))[-1]

    assert last("sim-incomplete")["response"]["incomplete_details"] == {
        "reason": "max_output_tokens"
    }
    assert last("sim-failed")["response"]["error"]["code"] == "server_error"
    events = parse(stream_raw(simulator_url, body("sim-error")))
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-2]["message"] and events[-2]["error"]["message"] == events[-2]["message"]
    text = [
        e
        for e in parse(stream_raw(simulator_url, body("sim-failed")))
        if e["type"] == "response.output_text.delta"
    ]
    assert text, "sim-failed shows text before failing"


def test_citations_follow_the_web_search(simulator_url: str) -> None:
    events = parse(stream_raw(simulator_url, body("sim-citations")))
    types = [e["type"] for e in events]
    assert types.index("response.web_search_call.completed") < types.index(
        "response.content_part.added"
    )
    notes = [e for e in events if e["type"] == "response.output_text.annotation.added"]
    assert [n["annotation_index"] for n in notes] == [0, 1, 2]
    text = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    for note in notes:
        a = note["annotation"]
        assert a["type"] == "url_citation" and a["url"] in text[a["start_index"] : a["end_index"]]


def test_long_text_has_thousands_of_deltas(simulator_url: str) -> None:
    events = parse(stream_raw(simulator_url, body("sim-long")))
    assert sum(e["type"] == "response.output_text.delta" for e in events) == 3000


def test_text_is_non_ascii_and_multi_paragraph(simulator_url: str) -> None:
    events = parse(stream_raw(simulator_url, body("sim-text", metadata={"sim.seed": "3"})))
    text = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    assert "\n\n" in text and any(ord(c) > 127 for c in text)


def test_same_seed_same_bytes_other_seed_differs(simulator_url: str) -> None:
    for model in ("sim-text", "sim-parallel-functions", "sim-image"):
        first = stream_raw(simulator_url, body(model))
        assert stream_raw(simulator_url, body(model)) == first
        other = stream_raw(simulator_url, body(model, metadata={"sim.seed": "8"}))
        assert other != first
        assert parse(other)[0]["response"]["id"] != parse(first)[0]["response"]["id"]


def test_non_stream_returns_the_final_response(simulator_url: str) -> None:
    streamed = parse(stream_raw(simulator_url, body("sim-text")))[-1]["response"]
    response = post_raw(simulator_url, body("sim-text", stream=False))
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.json() == streamed
    got = get(f"{simulator_url}/responses/{streamed['id']}")
    assert got.json() == streamed


def test_logprobs_when_included(simulator_url: str) -> None:
    events = parse(
        stream_raw(
            simulator_url,
            body("sim-text", include=["message.output_text.logprobs"], top_logprobs=2),
        )
    )
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert all(len(d["logprobs"]) == 1 and d["logprobs"][0]["token"] == d["delta"] for d in deltas)
    assert all(len(d["logprobs"][0]["top_logprobs"]) == 2 for d in deltas)
    plain = parse(stream_raw(simulator_url, body("sim-text")))
    assert all(e["logprobs"] == [] for e in plain if e["type"] == "response.output_text.delta")


def test_models_lists_scenarios_and_faults(simulator_url: str) -> None:
    data = get(f"{simulator_url}/models").json()
    assert data["object"] == "list"
    assert [m["id"] for m in data["data"]] == SCENARIO_NAMES
    for model in data["data"]:
        assert model["object"] == "model" and model["owned_by"] == "simulator"
        assert "sim.drop_after" in model["description"]


def test_request_errors_have_the_api_shape(simulator_url: str) -> None:
    def error(payload: dict) -> tuple[int, dict]:
        r = post_raw(simulator_url, payload)
        return r.status_code, r.json()["error"]

    status, err = error(body("gpt-nonexistent"))
    assert status == 400 and err["code"] == "model_not_found" and err["param"] == "model"
    status, err = error(body("sim-text", metadata={"sim.drop_after": "soon"}))
    assert status == 400 and err["type"] == "invalid_request_error"
    assert err["param"] == "metadata.sim.drop_after"
    status, err = error({"model": "sim-text", "input": "x", "metadata": {"sim.seed": 7}})
    assert status == 400 and err["code"] == "invalid_type"
    status, err = error(body("sim-text", metadata={"sim.bogus": "1"}))
    assert status == 400 and "sim.bogus" in err["message"]
    status, err = error(body("sim-text", metadata={"sim.http_error": "418"}))
    assert status == 400
    status, err = error(body("sim-text", previous_response_id="resp_missing"))
    assert status == 404 and err["code"] == "previous_response_not_found"
    assert err["param"] == "previous_response_id"
    r = get(f"{simulator_url}/responses/resp_missing")
    assert r.status_code == 404 and r.json()["error"]["type"] == "invalid_request_error"


def test_sim_text_says_back_its_instructions_and_stops_at_max_output_tokens(simulator_url: str) -> None:
    sent = {"instructions": "Answer like a pirate.", "temperature": 0.2, "reasoning": {"effort": "low"}}
    events = parse(stream_raw(simulator_url, body("sim-text", **sent)))
    text = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    assert text.startswith("Instructions received: “Answer like a pirate.”\n\n")
    final = events[-1]["response"]
    assert final["status"] == "completed" and final["instructions"] == "Answer like a pirate."
    assert final["temperature"] == 0.2 and final["reasoning"]["effort"] == "low"
    cut = parse(stream_raw(simulator_url, body("sim-text", max_output_tokens=5)))
    assert cut[-1]["type"] == "response.incomplete"
    assert cut[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    plain = parse(stream_raw(simulator_url, body("sim-text")))
    assert plain[-1]["type"] == "response.completed", "no instructions, no cap: as before"
    assert not next(e["text"] for e in plain if e["type"] == "response.output_text.done").startswith("Instructions")

"""WebSocket mode of the standalone simulator, over real loopback sockets (the `websockets` client)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from responses_app.simulator.wsmode import LIMIT_CODE
from tests.simulator.helpers import AUTH, SCENARIO_NAMES, body, parse, stream_raw

TERMINALS = {"response.completed", "response.failed", "response.incomplete"}


def ws_url(simulator_url: str) -> str:
    return simulator_url.replace("http://", "ws://", 1) + "/responses"


def create(model: str, stream_id: str | None = None, **extra: Any) -> str:
    payload = {"type": "response.create", **body(model, **extra)}
    payload.pop("stream")  # implicit in WebSocket mode
    if stream_id is not None:
        payload["stream_id"] = stream_id
    return json.dumps(payload)


async def until_terminal(ws: ClientConnection, timeout: float = 20) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while not events or events[-1]["type"] not in TERMINALS | {"error"}:
            events.append(json.loads(await ws.recv()))
    return events


@pytest.mark.parametrize("model", SCENARIO_NAMES)
async def test_each_scenario_sends_the_events_of_its_sse_stream_one_per_frame(simulator_url: str,
                                                                              model: str) -> None:
    sse = parse(await asyncio.to_thread(stream_raw, simulator_url, body(model)))
    async with connect(ws_url(simulator_url), additional_headers=AUTH) as ws:
        await ws.send(create(model))
        frames = await until_terminal(ws)
        if frames[-1]["type"] == "error":  # sim-error: response.failed follows the error event
            frames.append(json.loads(await ws.recv()))
    assert frames == sse, "the same events, byte for byte once parsed, with no SSE framing"


async def test_lanes_echo_their_stream_id_run_side_by_side_and_each_in_order(simulator_url: str) -> None:
    slow = {"sim.tokens_per_s": "200", "sim.tokens": "40"}
    async with connect(ws_url(simulator_url), additional_headers=AUTH) as ws:
        # different inputs: a seeded request is its response id, and a second one would replace the first
        await ws.send(create("sim-long", "a", metadata=slow, input="one"))
        await ws.send(create("sim-long", "a", metadata=slow, input="two"))
        await ws.send(create("sim-long", "b", metadata=slow, input="three"))
        lanes: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        order: list[str] = []
        async with asyncio.timeout(30):
            while sum(e["type"] in TERMINALS for lane in lanes.values() for e in lane) < 3:
                event = json.loads(await ws.recv())
                lanes[event["stream_id"]].append(event)
                order.append(event["stream_id"])
    a_types = [e["type"] for e in lanes["a"]]
    first_end = a_types.index("response.completed")
    assert a_types.count("response.created") == 2
    assert a_types.index("response.created", 1) > first_end, "one lane: the second request after the first"
    ids = {e["response"]["id"] for e in lanes["a"] if e["type"] == "response.created"}
    assert len(ids) == 2
    interleaved = order.index("b") < max(i for i, lane in enumerate(order) if lane == "a")
    assert interleaved, "lanes run side by side"


async def test_a_refusal_before_any_stream_is_one_error_event_and_the_socket_stays(simulator_url: str) -> None:
    async with connect(ws_url(simulator_url), additional_headers=AUTH) as ws:
        await ws.send(create("sim-text", "x", metadata={"sim.http_error": "429"}))
        error = json.loads(await ws.recv())
        assert error["type"] == "error" and error["status"] == 429 and error["stream_id"] == "x"
        assert error["error"]["code"] == "rate_limit_exceeded"
        assert error["error"]["headers"]["retry-after"] == "1"
        assert "sequence_number" not in error
        await ws.send(create("sim-text", "x", background=True))
        refused = json.loads(await ws.recv())
        assert refused["status"] == 400 and refused["error"]["param"] == "background"
        await ws.send(create("sim-text", "x"))
        assert (await until_terminal(ws))[-1]["type"] == "response.completed", "the same socket goes on"


async def test_store_false_is_known_to_its_own_connection_only(simulator_url: str) -> None:
    async with connect(ws_url(simulator_url), additional_headers=AUTH) as ws:
        await ws.send(create("sim-function", "main", store=False))
        first = (await until_terminal(ws))[-1]["response"]
        call = next(item for item in first["output"] if item["type"] == "function_call")
        outputs = [{"type": "function_call_output", "call_id": call["call_id"], "output": "12 C"}]
        await ws.send(create("sim-text", "main", input=outputs, previous_response_id=first["id"], store=False))
        followup = await until_terminal(ws)
        assert followup[-1]["type"] == "response.completed"
        assert "12 C" in followup[-1]["response"]["output"][-1]["content"][0]["text"]
        stored = httpx.get(f"{simulator_url}/responses/{first['id']}", headers=AUTH)
        assert stored.status_code == 404, "store: false: nothing kept outside the connection"
    async with connect(ws_url(simulator_url), additional_headers=AUTH) as ws:
        await ws.send(create("sim-text", "main", input="again", previous_response_id=first["id"]))
        error = json.loads(await ws.recv())
    assert error["type"] == "error" and error["status"] == 404
    assert error["error"]["code"] == "previous_response_not_found"


async def test_the_connection_limit_refuses_new_requests_and_closes_once_idle(simulator_url: str) -> None:
    slow = {"sim.tokens_per_s": "100", "sim.tokens": "60", "sim.ws_max_age_s": "0.2"}
    async with connect(ws_url(simulator_url), additional_headers=AUTH) as ws:
        opened = asyncio.get_running_loop().time()
        await ws.send(create("sim-long", "a", metadata=slow))
        events = [json.loads(await ws.recv())]
        while asyncio.get_running_loop().time() - opened < 0.3:  # past the limit, the response still going
            events.append(json.loads(await ws.recv()))
        assert events[-1]["type"] not in TERMINALS
        await ws.send(create("sim-text", "b"))
        later: list[dict[str, Any]] = []
        with pytest.raises(ConnectionClosed) as closed:
            async with asyncio.timeout(20):
                while True:
                    later.append(json.loads(await ws.recv()))
    refused = [e for e in later if e.get("stream_id") == "b"]
    assert refused == [refused[0]] and refused[0]["error"]["code"] == LIMIT_CODE
    assert [e["type"] for e in events + later if e.get("stream_id") == "a"][-1] == "response.completed", \
        "the response in flight finished"
    assert closed.value.rcvd is not None and closed.value.rcvd.reason == LIMIT_CODE


async def test_drop_after_closes_the_connection_and_cancels_what_was_in_flight(simulator_url: str) -> None:
    async with connect(ws_url(simulator_url), additional_headers=AUTH) as ws:
        await ws.send(create("sim-text", "a", metadata={"sim.drop_after": "8", "sim.tokens_per_s": "50"}))
        events = []
        with pytest.raises(ConnectionClosed) as closed:
            async with asyncio.timeout(20):
                while True:
                    events.append(json.loads(await ws.recv()))
    assert [e["sequence_number"] for e in events] == list(range(9))
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
    response_id = events[0]["response"]["id"]
    for _ in range(100):
        status = httpx.get(f"{simulator_url}/responses/{response_id}", headers=AUTH).json()["status"]
        if status != "in_progress":
            break
        await asyncio.sleep(0.02)
    assert status == "cancelled", "a foreground response dies with its connection"


async def test_malformed_and_duplicate_frames_keep_their_lane(simulator_url: str) -> None:
    async with connect(ws_url(simulator_url), additional_headers=AUTH) as ws:
        await ws.send(create("sim-text", "m", metadata={"sim.malformed_at": "5", "sim.duplicate": "true"}))
        frames: list[str] = []
        async with asyncio.timeout(20):
            while sum('"type":"response.completed"' in f for f in frames) < 2:  # the terminal, twice
                frames.append(str(await ws.recv()))
    broken = [f for f in frames if not f.endswith("}")]
    assert len(broken) == 2 and all(f.startswith('{"stream_id":"m",') for f in broken)
    parsed = [json.loads(f) for f in frames if f.endswith("}")]
    assert [e["sequence_number"] for e in parsed[::2]] == [e["sequence_number"] for e in parsed[1::2]]


async def test_deltas_are_padded_unless_asked_not_to(simulator_url: str) -> None:
    async with connect(ws_url(simulator_url), additional_headers=AUTH) as ws:
        await ws.send(create("sim-text", "p"))
        padded = await until_terminal(ws)
        await ws.send(create("sim-text", "p", stream_options={"include_obfuscation": False}))
        plain = await until_terminal(ws)
    deltas = [e for e in padded if e["type"].endswith(".delta")]
    assert deltas and all(e["obfuscation"] for e in deltas)
    assert not any("obfuscation" in e for e in plain)


async def test_a_wrong_key_is_refused_at_the_handshake(simulator_url: str) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with connect(ws_url(simulator_url), additional_headers={"authorization": "Bearer nope"}):
            pass
    assert refused.value.response.status_code == 401
    assert b"Incorrect API key" in refused.value.response.body

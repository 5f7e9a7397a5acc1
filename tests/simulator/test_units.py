"""In-process checks: the mount in project.asgi, fault parsing, tokenizer and the bounded store."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from responses_app.simulator import create_app
from responses_app.simulator.api_errors import ApiError
from responses_app.simulator.faults import Faults, parse_faults, validate_metadata
from responses_app.simulator.inprocess import request
from responses_app.simulator.store import SimResponse, Store
from responses_app.simulator.texts import PARAGRAPHS, tokenize


async def test_mounted_under_simulator_v1_in_the_project() -> None:
    from project.asgi import application

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/simulator/v1/models",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000"), (b"authorization", b"Bearer sim-dev-key")],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 1),
    }
    await application(scope, receive, send)
    assert sent[0]["status"] == 200
    assert orjson.loads(sent[1]["body"])["data"][0]["id"] == "sim-text"


async def test_in_process_stream_and_bad_json() -> None:
    app = create_app()
    status, data = await request(
        app,
        "POST",
        "/v1/responses",
        {
            "model": "sim-refusal",
            "input": "x",
            "stream": True,
            "metadata": {"sim.tokens_per_s": "0"},
        },
    )
    assert status == 200 and b'"response.refusal.done"' in data
    status, data = await request(app, "POST", "/responses", None)
    assert status == 400 and orjson.loads(data)["error"]["message"].startswith("Missing required")


def test_parse_faults() -> None:
    faults = parse_faults(
        {"sim.drop_after": "3", "sim.duplicate": "true", "sim.tokens_per_s": "2.5", "other": "kept"}
    )
    assert faults == Faults(drop_after=3, duplicate=True, tokens_per_s=2.5)
    for bad in (
        {"sim.duplicate": "maybe"},
        {"sim.stall_ms": "-1"},
        {"sim.keepalive_ms": "1"},
        {"sim.tokens_per_s": "nan"},
        {"sim.http_error": "404"},
        {"sim.nope": "1"},
    ):
        with pytest.raises(ApiError) as info:
            parse_faults(bad)
        assert (
            info.value.status == 400
            and info.value.param
            and info.value.param.startswith("metadata.")
        )
    with pytest.raises(ApiError):
        validate_metadata({f"k{i}": "v" for i in range(17)})


def test_tokenize_round_trips() -> None:
    for text in PARAGRAPHS:
        assert "".join(tokenize(text)) == text
    assert tokenize("Hello, world!") == ["Hello", ",", " world", "!"]


async def test_store_is_bounded() -> None:
    store = Store(capacity=10, max_age_s=3600)
    for n in range(50):
        resp = SimResponse(
            f"resp_{n}", {"status": "completed"}, background=False, faults=Faults(), prev_id=None
        )
        resp.finish()
        store.add(resp)
    assert len(store) <= 10 and store.get("resp_49") is not None and store.get("resp_0") is None
    running = SimResponse(
        "resp_running", {"status": "in_progress"}, background=True, faults=Faults(), prev_id=None
    )
    store.add(running)
    for n in range(50, 80):
        done = SimResponse(
            f"resp_{n}", {"status": "completed"}, background=False, faults=Faults(), prev_id=None
        )
        done.finish()
        store.add(done)
    assert store.get("resp_running") is running  # never evicts what is still generating
    await asyncio.sleep(0)

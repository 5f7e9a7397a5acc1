"""Raw-HTTP helpers and the event-stream invariants every simulated stream must obey."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from responses_app.simulator.auth import DEV_API_KEY
from responses_app.simulator.scenarios import SCENARIOS

SCENARIO_NAMES = list(SCENARIOS)
TERMINAL = ("response.completed", "response.failed", "response.incomplete")
FAST = {"sim.tokens_per_s": "0", "sim.seed": "7"}
T = TypeVar("T")
# The standalone simulator of tests/servers.py demands the development key, as the relay sends it.
AUTH = {"authorization": f"Bearer {DEV_API_KEY}"}


def body(
    model: str, *, stream: bool = True, input: Any = "Tell me something.", **extra: Any
) -> dict[str, Any]:
    metadata = {**FAST, **extra.pop("metadata", {})}
    return {"model": model, "input": input, "stream": stream, "metadata": metadata, **extra}


def post_raw(url: str, payload: dict[str, Any], timeout: float = 30) -> httpx.Response:
    with httpx.Client(timeout=timeout, headers=AUTH) as client:
        return client.post(f"{url}/responses", json=payload)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, headers=AUTH, **kwargs)


def stream_raw(url: str, payload: dict[str, Any], timeout: float = 30) -> bytes:
    response = post_raw(url, payload, timeout)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return response.content


def blocks(data: bytes) -> list[str]:
    return [b for b in data.decode().split("\n\n") if b]


def block_event(block: str) -> dict[str, Any]:
    """The event of one SSE block, its `event:` line checked against the payload's type."""
    lines = block.splitlines()
    assert lines[0].startswith("event: ") and lines[1].startswith("data: "), block[:200]
    event: dict[str, Any] = json.loads(lines[1][6:])
    assert lines[0][7:] == event["type"]
    return event


def parse(data: bytes) -> list[dict[str, Any]]:
    """Events of a stream; comments are skipped, broken JSON raises."""
    events = []
    for block in blocks(data):
        for line in block.splitlines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    return events


def wait_until(check: Callable[[], T | None], deadline_s: float = 20.0, every: float = 0.02) -> T:
    deadline = time.monotonic() + deadline_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        time.sleep(every)


_STREAMED = {
    # delta type -> (done type, done field, key of the part index)
    "response.output_text.delta": ("response.output_text.done", "text", "content_index"),
    "response.refusal.delta": ("response.refusal.done", "refusal", "content_index"),
    "response.function_call_arguments.delta": (
        "response.function_call_arguments.done",
        "arguments",
        None,
    ),
    "response.mcp_call_arguments.delta": ("response.mcp_call_arguments.done", "arguments", None),
    "response.code_interpreter_call_code.delta": (
        "response.code_interpreter_call_code.done",
        "code",
        None,
    ),
    "response.reasoning_summary_text.delta": (
        "response.reasoning_summary_text.done",
        "text",
        "summary_index",
    ),
}
_DONE = {done: (delta, field, key) for delta, (done, field, key) in _STREAMED.items()}


def check_invariants(events: list[dict[str, Any]]) -> None:
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created"
    assert events[-1]["type"] in TERMINAL
    assert not any(e["type"] in TERMINAL for e in events[:-1])
    items: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    done: dict[str, dict[str, Any]] = {}
    parts: set[tuple[str, str, int]] = set()
    acc: dict[tuple[str, str, int], str] = {}
    for e in events[1:-1]:
        kind = e["type"]
        if kind == "response.output_item.added":
            item_id = e["item"]["id"]
            assert item_id not in items and e["output_index"] == len(order)
            items[item_id] = e
            order.append(item_id)
            continue
        if kind == "response.output_item.done":
            item_id = e["item"]["id"]
            assert item_id in items and item_id not in done
            assert e["output_index"] == items[item_id]["output_index"]
            done[item_id] = e["item"]
            continue
        if "item_id" not in e:
            continue
        item_id = e["item_id"]
        assert item_id in items, f"{kind} before its item was added"
        assert item_id not in done, f"{kind} after its item was done"
        assert e["output_index"] == items[item_id]["output_index"]
        if kind in ("response.content_part.added", "response.reasoning_summary_part.added"):
            key = "content_index" if "content_index" in e else "summary_index"
            parts.add((item_id, key, e[key]))
        elif kind in _STREAMED:
            _, _, key = _STREAMED[kind]
            index = e[key] if key else 0
            if key:
                assert (item_id, key, index) in parts, f"{kind} before its part was added"
            acc[(item_id, kind, index)] = acc.get((item_id, kind, index), "") + e["delta"]
        elif kind in _DONE:
            delta, field, key = _DONE[kind]
            index = e[key] if key else 0
            assert e[field] == acc.get((item_id, delta, index), ""), (
                f"{kind} differs from its deltas"
            )
    final = events[-1]["response"]
    assert final["output"] == [done[i] for i in order if i in done]
    assert final["status"] == events[-1]["type"].removeprefix("response.")

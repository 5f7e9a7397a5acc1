"""Drives the simulator's WebSocket mode with openai-python 3.x's `client.responses.connect`.

Run by tests/simulator/test_sdk_websocket.py with the interpreter of a separate environment that
has openai 3.x (the suite stays on 2.x); it imports nothing from this project. Reads a JSON plan
on stdin, prints one JSON object with what the SDK parsed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import openai

TERMINALS = {"response.completed", "response.failed", "response.incomplete"}


def until_done(connection: Any, expected: int) -> list[dict[str, Any]]:
    """Events until `expected` responses ended (a refusal, an error event without a sequence
    number, ends one too)."""
    events: list[dict[str, Any]] = []
    done = 0
    while done < expected:
        event = connection.recv()
        events.append(event.to_dict(mode="json"))
        if event.type in TERMINALS or (event.type == "error" and event.sequence_number is None):
            done += 1
    return events


def main() -> None:
    plan = json.load(sys.stdin)
    client = openai.OpenAI(base_url=plan["base_url"], api_key=plan["api_key"], max_retries=0)
    out: dict[str, Any] = {"version": openai.__version__, "runs": []}
    last: dict[str, Any] = {}  # the previous batch's last response ("$last" in a plan stands for its id)
    with client.responses.connect() as connection:
        for batch in plan["batches"]:
            for create in batch:
                if create.get("previous_response_id") == "$last":
                    create["previous_response_id"] = last["id"]
                if create.get("input") == "$outputs":  # each function call of it answered
                    create["input"] = [{"type": "function_call_output", "call_id": item["call_id"], "output": "12 C"}
                                       for item in last["output"] if item["type"] == "function_call"]
                connection.response.create(**create)
            events = until_done(connection, len(batch))
            last = next((e["response"] for e in reversed(events) if "response" in e), last)
            out["runs"].append(events)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

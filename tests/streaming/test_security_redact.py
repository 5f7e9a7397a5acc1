"""Redaction of every tool payload kind, on every real capture: what the raw event log would hold
carries none of the tool payloads the stream did, keeps messages, and still replays to the same
item structure. Plus the per-request identity of tool calls."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from responses_app import selectors, services
from responses_app.streaming.redact import DEFAULT_FIELDS, REDACTED, needs_redaction, redact_event
from responses_app.streaming.replay import replay_bytes
from tests.conftest import REAL_STREAMS, real_stream_files, require_real_streams

FIELDS = frozenset(DEFAULT_FIELDS)
FILES = real_stream_files() or [REAL_STREAMS / "absent.sse"]
TOOL_KEYS = {"arguments", "input", "output", "outputs", "result", "results", "code", "action", "queries",
             "operation", "error", "command", "commands", "partial_image_b64", "delta", "diff"}
TEXT_KINDS = ("output_text", "reasoning", "refusal", "annotation", "summary")
TOOL_EVENTS = ("function_call", "mcp_call", "custom_tool", "code_interpreter", "shell_call", "apply_patch",
               "image_generation", "web_search", "file_search")


def events_of(path: Path) -> list[dict[str, Any]]:
    events = []
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    return events


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k not in ("type", "id", "call_id", "status") for s in strings(v)]
    return []


def payloads(events: list[dict[str, Any]]) -> set[str]:
    """Distinctive strings of every tool payload in the stream (not message or reasoning text)."""
    found: set[str] = set()
    for event in events:
        kind = event.get("type", "")
        if any(t in kind for t in TEXT_KINDS) or kind.startswith("response.content_part"):
            continue
        items = [event["item"]] if isinstance(event.get("item"), dict) else []
        if isinstance(event.get("response"), dict):
            items += [i for i in event["response"].get("output") or [] if isinstance(i, dict)]
        for item in items:
            if item.get("type") in ("message", "reasoning", "compaction"):
                continue
            found.update(s for k, v in item.items() if k in TOOL_KEYS for s in strings(v))
        if not items and any(tool in kind for tool in TOOL_EVENTS):
            found.update(s for k, v in event.items() if k in TOOL_KEYS for s in strings(v))
    return {s for s in found if len(s) >= 12}


def message_text(events: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(e) for e in events if any(t in e.get("type", "") for t in TEXT_KINDS))


@pytest.fixture(params=FILES, ids=[f.stem for f in FILES])
def capture(request: pytest.FixtureRequest) -> Path:
    require_real_streams()
    return Path(request.param)


def test_no_tool_payload_survives_and_the_log_still_replays(capture: Path) -> None:
    events = events_of(capture)
    redacted = [redact_event(e, FIELDS) if needs_redaction(e.get("type", "")) else e for e in events]
    logged = "\n".join(json.dumps(e) for e in redacted)
    quoted = message_text(events)  # a model may quote its own code in its answer: that text stays
    leaked = [s for s in payloads(events) if json.dumps(s)[1:-1] in logged
              and json.dumps(s)[1:-1] not in quoted]
    assert not leaked, f"unredacted tool payloads: {leaked[:3]}"
    original = replay_bytes(b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events))
    again = replay_bytes(b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in redacted))
    assert again.status == original.status and again.terminal == original.terminal
    shape = [(i.get("type"), i.get("id")) for i in original.response.get("output", [])]
    assert [(i.get("type"), i.get("id")) for i in again.response.get("output", [])] == shape
    texts = [c.get("text") for i in original.response.get("output", []) if i.get("type") == "message"
             for c in i.get("content") or []]
    assert [c.get("text") for i in again.response.get("output", []) if i.get("type") == "message"
            for c in i.get("content") or []] == texts


@pytest.mark.parametrize(("item", "key"), [
    ({"type": "code_interpreter_call", "id": "ci", "code": "import os",
      "outputs": [{"type": "logs", "logs": "secret"}]}, "outputs"),
    ({"type": "shell_call", "id": "sh", "action": {"commands": ["cat /etc/passwd"], "timeout_ms": 1000}}, "action"),
    ({"type": "shell_call_output", "id": "sho", "output": [{"stdout": "root:x:0", "outcome": {"type": "exit"}}]},
     "output"),
    ({"type": "web_search_call", "id": "ws", "action": {"type": "search", "query": "my diagnosis"}}, "action"),
    ({"type": "file_search_call", "id": "fs", "queries": ["salary"], "results": [{"text": "42k"}]}, "results"),
    ({"type": "image_generation_call", "id": "ig", "result": "iVBORw0KGgo="}, "result"),
    ({"type": "mcp_call", "id": "mcp", "arguments": "{}", "output": "rows", "error": "db password wrong"}, "error"),
    ({"type": "custom_tool_call", "id": "ct", "input": "free text"}, "input"),
])
def test_every_tool_item_kind_is_redacted_keeping_its_shape(item: dict[str, Any], key: str) -> None:
    done = redact_event({"type": "response.output_item.done", "item": item, "output_index": 0}, FIELDS)["item"]
    assert REDACTED in json.dumps(done[key])
    assert done["type"] == item["type"] and done["id"] == item["id"]
    if isinstance(item[key], dict):
        assert done[key].keys() == item[key].keys(), "the payload keeps its shape"
    assert item[key] != done[key], "the live event is untouched"


@pytest.mark.django_db
def test_tool_calls_with_the_same_id_in_two_requests_never_share_a_row() -> None:
    users = [get_user_model().objects.create_user(name, password="pw") for name in ("alice", "bob")]
    requests = [services.request_create(owner=u, input="x", model="sim-function",
                                        client_request_id=str(uuid.uuid4()))[0] for u in users]
    claims = [services.tool_call_claim(request_id=r.pk, call_id="call_same", name="lookup", arguments={})
              for r in requests]
    assert all(claim is not None for claim in claims), "each request runs its own tool"
    assert services.tool_call_claim(request_id=requests[0].pk, call_id="call_same", name="lookup",
                                    arguments={}) is None, "but only once per request"
    for request, output in zip(requests, ("alice's answer", "bob's answer"), strict=True):
        services.tool_call_finish(request_id=request.pk, call_id="call_same", output=output, ok=True)
    assert selectors.tool_call_output(request_id=requests[0].pk, call_id="call_same") == "alice's answer"
    assert selectors.tool_call_output(request_id=requests[1].pk, call_id="call_same") == "bob's answer"
    assert selectors.tool_call_output(request_id=requests[1].pk, call_id="call_other") is None

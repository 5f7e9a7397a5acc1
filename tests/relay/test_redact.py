"""Sensitive tool payloads are redacted before the raw event log, and the log still replays."""

from __future__ import annotations

import json

from responses_app.streaming.redact import REDACTED, redact_event

FIELDS = frozenset({"arguments", "output"})


def test_streamed_arguments_are_redacted() -> None:
    event = {"type": "response.function_call_arguments.delta", "delta": '{"ssn": "1', "item_id": "fc_1",
             "output_index": 0, "sequence_number": 4}
    redacted = redact_event(event, FIELDS)
    assert redacted["delta"] == REDACTED and redacted["item_id"] == "fc_1"
    assert event["delta"] == '{"ssn": "1', "the live event is untouched"


def test_tool_items_in_items_and_final_response_are_redacted_messages_are_not() -> None:
    call = {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "lookup", "arguments": '{"ssn":1}'}
    message = {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "hi"}]}
    done = redact_event({"type": "response.output_item.done", "item": call, "output_index": 0}, FIELDS)
    assert done["item"]["arguments"] == REDACTED and done["item"]["name"] == "lookup"
    final = redact_event({"type": "response.completed", "response": {"output": [call, message]}}, FIELDS)
    assert final["response"]["output"][0]["arguments"] == REDACTED
    assert final["response"]["output"][1] == message


def test_fields_not_listed_are_kept() -> None:
    event = {"type": "response.code_interpreter_call_code.delta", "delta": "print(1)"}
    assert redact_event(event, FIELDS) is event
    assert json.dumps(redact_event(event, frozenset({"code"}))).count(REDACTED) == 1

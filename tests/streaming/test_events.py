"""Typed stream events: the catalogue, its TypedDicts, parse_event on good, bad and real data."""

from __future__ import annotations

import os
import typing
from pathlib import Path

import orjson
import pytest

from responses_app.streaming import events
from responses_app.streaming.errors import MalformedEvent
from responses_app.streaming.events import (
    KNOWN_EVENT_TYPES,
    LIFECYCLE_EVENT_TYPES,
    TERMINAL_EVENT_TYPES,
    KnownEvent,
    StreamEvent,
    UnknownEvent,
    is_known,
    parse_event,
)
from tests.conftest import REAL_STREAMS


def real_captures() -> list[Path]:
    if not REAL_STREAMS.is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must have the real-stream captures at {REAL_STREAMS}")
        pytest.skip(f"{REAL_STREAMS} is absent on this machine")
    files = sorted(REAL_STREAMS.glob("*.sse"))
    assert files, f"no .sse captures in {REAL_STREAMS}"
    return files


def data_lines(path: Path) -> list[str]:
    return [
        line[len("data: ") :]
        for block in path.read_text(encoding="utf-8").split("\n\n")
        for line in block.splitlines()
        if line.startswith("data: ")
    ]


def literal_type_of(typed_dict: type) -> str:
    (value,) = typing.get_args(typing.get_type_hints(typed_dict)["type"])
    assert isinstance(value, str)
    return value


# --- The catalogue ------------------------------------------------------------------------------


def test_known_types_are_the_current_sdks_union_plus_the_apply_patch_diff_types() -> None:
    sdk_file = Path(__file__).resolve().parents[1] / "fixtures" / "sdk_event_types.txt"
    sdk = {line for line in sdk_file.read_text().splitlines() if line and not line.startswith("#")}
    assert len(sdk) == 59  # openai-python 3.57.0's ResponseStreamEvent union
    assert sdk <= KNOWN_EVENT_TYPES, sorted(sdk - KNOWN_EVENT_TYPES)
    assert KNOWN_EVENT_TYPES - sdk == {
        "response.apply_patch_call_operation_diff.delta", "response.apply_patch_call_operation_diff.done",
    }, "only the apply-patch diff events, typed from captures, are beyond the SDK"
    assert len(KNOWN_EVENT_TYPES) == 61


def test_lifecycle_groupings() -> None:
    assert TERMINAL_EVENT_TYPES == {"response.completed", "response.failed", "response.incomplete"}
    assert LIFECYCLE_EVENT_TYPES == TERMINAL_EVENT_TYPES | {
        "response.created",
        "response.queued",
        "response.in_progress",
    }
    assert LIFECYCLE_EVENT_TYPES <= KNOWN_EVENT_TYPES


def test_is_known() -> None:
    assert is_known("response.output_text.delta")
    assert is_known("error")
    assert not is_known("response.output_text.delta.v2")
    assert not is_known("")


def test_every_type_in_the_real_captures_is_known() -> None:
    seen = {orjson.loads(line)["type"] for path in real_captures() for line in data_lines(path)}
    assert seen - KNOWN_EVENT_TYPES == set()


# --- The TypedDicts -----------------------------------------------------------------------------


def test_union_members_map_one_to_one_onto_known_types() -> None:
    members = typing.get_args(KnownEvent)
    literals = [literal_type_of(member) for member in members]
    assert len(literals) == len(set(literals)), "two TypedDicts claim the same type"
    assert set(literals) == KNOWN_EVENT_TYPES


def test_stream_event_is_the_known_union_plus_unknown_event() -> None:
    assert typing.get_args(StreamEvent) == (*typing.get_args(KnownEvent), UnknownEvent)
    assert typing.get_type_hints(UnknownEvent)["type"] is str


def test_every_event_declares_an_optional_sequence_number() -> None:
    for member in typing.get_args(StreamEvent):
        hint = typing.get_type_hints(member, include_extras=True)["sequence_number"]
        assert typing.get_origin(hint) is typing.NotRequired, member.__name__


def test_typed_dict_names_follow_the_event_class_convention() -> None:
    for member in typing.get_args(KnownEvent):
        assert member.__name__.startswith("Response") and member.__name__.endswith("Event")
        assert getattr(events, member.__name__) is member


# --- parse_event --------------------------------------------------------------------------------

TEXT_DELTA = (
    '{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,'
    '"content_index":0,"delta":"Hi","logprobs":[],"sequence_number":4}'
)


def test_parses_bytes_and_str_alike() -> None:
    from_bytes = parse_event(TEXT_DELTA.encode())
    from_str = parse_event(TEXT_DELTA)
    assert from_bytes == from_str
    assert is_known(from_str["type"])
    event = typing.cast(KnownEvent, from_str)  # UnknownEvent's `type: str` blocks narrowing
    assert event["type"] == "response.output_text.delta"
    assert event["delta"] == "Hi"
    assert event.get("sequence_number") == 4


def test_sequence_number_is_optional() -> None:
    event = parse_event(b'{"type":"response.created","response":{"id":"resp_1"}}')
    assert event["type"] == "response.created"
    assert "sequence_number" not in event


def test_unknown_types_are_returned_untouched() -> None:
    data = b'{"type":"response.hologram.delta","sequence_number":9,"delta":{"x":1}}'
    event = parse_event(data)
    assert event == {"type": "response.hologram.delta", "sequence_number": 9, "delta": {"x": 1}}
    assert not is_known(event["type"])


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"type": x}', "invalid JSON (unexpected character, expected a JSON value at line 1"),
        ('{"type":"error",', "invalid JSON (unexpected end of data at line 1 column 17)"),
        (b"", "invalid JSON (Input is a zero-length, empty document"),
        (b'{"type":"error"} trailing', "invalid JSON (unexpected content after document"),
        (b"\xff\xfe", "invalid JSON (str is not valid UTF-8"),
        (b'[{"type":"response.created"}]', "not a JSON object but an array"),
        (b'"response.created"', "not a JSON object but a string"),
        (b"null", "not a JSON object but null"),
        (b'{"sequence_number":1}', "missing string 'type'"),
        (b'{"type":null}', "'type' is null, not a string"),
        (b'{"type":7}', "'type' is a number, not a string"),
        (b'{"type":["error"]}', "'type' is an array, not a string"),
        (b'{"type":""}', "'type' is an empty string"),
        (b'{"type":"error","sequence_number":true}', "'sequence_number' is a boolean, not an"),
        (b'{"type":"error","sequence_number":"3"}', "'sequence_number' is a string, not an"),
        (b'{"type":"error","sequence_number":3.0}', "'sequence_number' is a number, not an"),
        (b'{"type":"error","sequence_number":null}', "'sequence_number' is null, not an"),
    ],
)
def test_malformed_input_raises_with_a_helpful_reason(data: str | bytes, reason: str) -> None:
    with pytest.raises(MalformedEvent) as caught:
        parse_event(data)
    assert caught.value.reason.startswith(reason), caught.value.reason
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    assert caught.value.data == text
    assert reason in str(caught.value)


def test_malformed_event_keeps_long_payloads_whole_but_previews_them() -> None:
    data = "[" + ",".join(["1"] * 200) + "]"
    with pytest.raises(MalformedEvent) as caught:
        parse_event(data)
    assert caught.value.data == data
    assert "..." in str(caught.value)


def test_every_real_capture_parses() -> None:
    for path in real_captures():
        lines = data_lines(path)
        assert lines, path.name
        for number, line in enumerate(lines):
            event = parse_event(line.encode())
            assert event == orjson.loads(line), f"{path.name} data line {number}"

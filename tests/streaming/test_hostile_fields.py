"""A field of the wrong JSON type is a malformed event, never an exception that ends the stream.

Every recorded simulator stream, with one top-level field of one of its first 40 events replaced
by each JSON kind in turn (22,043 streams): before parse_event checked the fields' types, 343 of
them raised from the assembler (an id that is an array is unhashable, an index that is a string
does not compare), and 402 compiled (mypyc checks annotations at run time).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from responses_app.streaming import events
from responses_app.streaming.events import MalformedEvent, parse_event
from responses_app.streaming.transcript import Transcript

FIXTURES = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "sim").glob("*.sse"))
KINDS: list[Any] = [None, 5, "s", [], {}, True, 1.5]


def _events(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line[6:]) for line in path.read_bytes().split(b"\n") if line.startswith(b"data: ")]


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(event) + b"\n\n" for event in events)


def _rejected(event: dict[str, Any]) -> bool:
    try:
        parse_event(orjson.dumps(event))
    except MalformedEvent:
        return True
    return False


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_one_field_of_the_wrong_type_never_raises(path: Path) -> None:
    events = _events(path)
    clean = Transcript()
    clean.feed(_sse(events), 0.0)
    clean.finish()
    for index, event in enumerate(events[:40]):
        for field in event:
            if field == "type":
                continue
            for kind in KINDS:
                mutated = {**event, field: kind}
                transcript = Transcript()
                transcript.feed(_sse([*events[:index], mutated, *events[index + 1:]]), 0.0)
                transcript.finish()
                transcript.view.to_dict()
                transcript.snapshot()
                # the mutated event is skipped and counted when its type is off, applied otherwise
                assert transcript.pipeline.malformed == _rejected(mutated), (index, field, kind)
    assert clean.pipeline.malformed == 0


def test_the_reason_names_the_field_and_the_type_it_should_have() -> None:
    delta = {"type": "response.output_text.delta", "sequence_number": 4, "item_id": "msg_1", "output_index": 0,
             "content_index": 0, "delta": "hi"}
    with pytest.raises(MalformedEvent, match="'item_id' is an array, not a string"):
        parse_event(orjson.dumps({**delta, "item_id": ["msg_1"]}))
    with pytest.raises(MalformedEvent, match="'content_index' is a string, not an integer"):
        parse_event(orjson.dumps({**delta, "content_index": "0"}))
    with pytest.raises(MalformedEvent, match="'output_index' is a boolean, not an integer"):
        parse_event(orjson.dumps({**delta, "output_index": True}))
    with pytest.raises(MalformedEvent, match="'sequence_number' is null, not an integer"):
        parse_event(orjson.dumps({"type": "some.future.event", "sequence_number": None}))
    assert parse_event(orjson.dumps({**delta, "obfuscation": "x"}))["delta"] == "hi"


def test_the_text_delta_fast_path_checks_exactly_its_typed_dicts_fields() -> None:
    shape = dict(events._SHAPES[events._TEXT_DELTA])
    delta = {"type": events._TEXT_DELTA, "sequence_number": 4, "item_id": "msg_1", "output_index": 0,
             "content_index": 0, "delta": "hi", "logprobs": [], "obfuscation": "x"}
    assert set(delta) - {"type"} == set(shape)
    assert events._plain_text_delta(delta) and events._plain_text_delta({"type": events._TEXT_DELTA})
    for field, admitted in shape.items():
        for kind in KINDS:
            assert events._plain_text_delta({**delta, field: kind}) == (type(kind) in admitted), (field, kind)

"""A lone surrogate escape in an event (a provider that cut a pair in two) is read as U+FFFD and
the rest of the event stays: the delta's other characters are shown, nothing is counted
malformed. A payload broken otherwise is malformed as before."""

from __future__ import annotations

import pytest

from responses_app.streaming.errors import MalformedEvent
from responses_app.streaming.events import parse_event
from responses_app.streaming.transcript import Transcript
from tests.streaming.test_limits import items_stream, sse


def with_lone_surrogates(body: bytes) -> bytes:
    return body.replace(b"LOW", b"\\udc00").replace(b"HIGH", b"\\ud800")


def test_lone_surrogates_become_replacement_characters() -> None:
    event = parse_event(with_lone_surrogates(b'{"type":"response.output_text.delta","delta":"aHIGHb\\ud83d\\ude00LOW",'
                                             b'"item_id":"HIGH","sequence_number":3}'))
    assert event["delta"] == "a\ufffdb\U0001f600\ufffd" and event["item_id"] == "\ufffd"  # type: ignore[typeddict-item]
    assert parse_event('{"type":"x","delta":"a\ud800b"}')["delta"] == "a\ufffdb"  # type: ignore[typeddict-item]


@pytest.mark.parametrize("payload", [
    b'{"type":"x","delta":"\\ud800","n":NaN}',
    b'{"type":"x","delta":"\\ud800"',
    b'{"type":"x","delta":"\\ud800","deep":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"type":7,"delta":"\\ud800"}',
])
def test_a_payload_broken_otherwise_is_still_malformed(payload: bytes) -> None:
    with pytest.raises(MalformedEvent):
        parse_event(payload)


def test_the_rest_of_the_delta_is_shown_and_nothing_is_malformed() -> None:
    events = items_stream(1, final_output=False)
    events[3]["delta"] = "hi HIGH there"
    events[4]["item"]["content"][0]["text"] = "hi HIGH there"
    transcript = Transcript()
    transcript.feed(with_lone_surrogates(sse(events[:4])))
    [block] = transcript.view.to_dict()["blocks"]
    assert block["text"] == "hi \ufffd there", "the delta as it streams"
    transcript.feed(with_lone_surrogates(sse(events[4:])))
    transcript.finish()
    assert transcript.snapshot()["output"][0]["content"][0]["text"] == "hi \ufffd there"
    assert transcript.pipeline.malformed == 0 and transcript.terminal

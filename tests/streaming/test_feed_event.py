"""One event's JSON in, without SSE framing (WebSocket mode): the same view, counters and raw
payloads as the SSE bytes it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from responses_app.streaming.sse import SSEDecoder
from responses_app.streaming.transcript import Transcript
from tests.conftest import real_stream_files

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sim"
FILES = sorted(FIXTURES.glob("*.sse")) + real_stream_files()


def payloads(data: bytes) -> list[str]:
    decoder = SSEDecoder()
    return [message.data for message in decoder.decode(data) + decoder.flush()]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_events_fed_one_by_one_equal_the_sse_bytes(path: Path) -> None:
    data = path.read_bytes()
    framed, frames = Transcript(), Transcript()
    framed_step = framed.feed(data)
    framed_step2 = framed.finish()
    logged: list[str] = []
    for payload in payloads(data):
        logged += frames.feed_event(payload).raw
    frames.finish()
    assert frames.view.to_dict() == framed.view.to_dict()
    assert frames.counters() == framed.counters()
    assert logged == framed_step.raw + framed_step2.raw, "the event log gets the payloads as they came"


def test_a_malformed_frame_is_counted_and_skipped() -> None:
    t = Transcript()
    t.feed_event('{"type":"response.output_text.delta","sequence_number":3,"delta":"bro')
    step = t.feed_event('{"type":"response.created","sequence_number":0,"response":{"id":"resp_1"}}')
    assert t.counters()["malformed_events"] == 1
    assert step.events and t.response_id == "resp_1"


def test_an_oversized_frame_is_counted_and_skipped() -> None:
    t = Transcript(max_event_bytes=64)
    step = t.feed_event('{"type":"response.output_text.delta","sequence_number":3,"delta":"' + "x" * 80 + '"}')
    assert not step.events and t.counters()["malformed_events"] == 1

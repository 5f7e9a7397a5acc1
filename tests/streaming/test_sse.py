"""Tests for the incremental SSE decoder, written from the WHATWG event-stream interpretation:
https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation

Pure tests: no Django, no database.
"""

from __future__ import annotations

import re
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from responses_app.streaming.errors import EventTooLarge, StreamError
from responses_app.streaming.sse import ServerSentEvent, SSEDecoder

BOM = b"\xef\xbb\xbf"


def decode_all(*chunks: bytes, max_event_bytes: int = 8 * 1024 * 1024) -> list[ServerSentEvent]:
    decoder = SSEDecoder(max_event_bytes)
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events += decoder.decode(chunk)
    events += decoder.flush()
    return events


def bytewise(stream: bytes) -> list[bytes]:
    return [stream[i : i + 1] for i in range(len(stream))]


def ev(
    data: str, event: str = "message", id: str = "", retry: int | None = None
) -> ServerSentEvent:
    return ServerSentEvent(event=event, data=data, id=id, retry=retry)


# A literal, slow reading of the spec, on text: the oracle for the property tests.
def spec_reference(stream: bytes) -> tuple[list[ServerSentEvent], str]:
    text = stream.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = re.split("\r\n|\r|\n", text)
    lines.pop()  # whatever follows the last line end is not a line: discarded at end of stream
    events: list[ServerSentEvent] = []
    data, event_type, retry, last_id = "", "", None, ""
    for line in lines:
        if line == "":
            if data == "":
                event_type, retry = "", None
                continue
            if data.endswith("\n"):
                data = data[:-1]
            events.append(ServerSentEvent(event_type or "message", data, last_id, retry))
            data, event_type, retry = "", "", None
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
        else:
            name, value = line, ""
        if name == "event":
            event_type = value
        elif name == "data":
            data += value + "\n"
        elif name == "id":
            if "\x00" not in value:
                last_id = value
        elif name == "retry":
            if value and all(c in "0123456789" for c in value):
                retry = int(value)
    return events, last_id


# --- the event object -------------------------------------------------------------------------


def test_event_equality_and_repr() -> None:
    a = ServerSentEvent("delta", "x", "7", 100)
    assert a == ServerSentEvent("delta", "x", "7", 100)
    assert a != ServerSentEvent("delta", "y", "7", 100)
    assert a != ("delta", "x", "7", 100)
    assert repr(a) == "ServerSentEvent(event='delta', data='x', id='7', retry=100)"
    assert ServerSentEvent() == ServerSentEvent("message", "", "", None)


def test_max_event_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SSEDecoder(0)


# --- line ends --------------------------------------------------------------------------------


def test_lf_line_ends() -> None:
    assert decode_all(b"data: a\ndata: b\n\n") == [ev("a\nb")]


def test_cr_line_ends() -> None:
    assert decode_all(b"data: a\rdata: b\r\r") == [ev("a\nb")]


def test_crlf_line_ends() -> None:
    assert decode_all(b"data: a\r\ndata: b\r\n\r\n") == [ev("a\nb")]


def test_mixed_line_ends_in_one_stream() -> None:
    assert decode_all(b"data: a\rdata: b\r\ndata: c\n\r\n") == [ev("a\nb\nc")]


def test_crlf_split_across_chunks() -> None:
    # Counted twice, the LF would be a blank line dispatching "a" on its own.
    assert decode_all(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [ev("a\nb")]


def test_crlf_split_across_chunks_with_empty_chunk_between() -> None:
    assert decode_all(b"data: a\r", b"", b"\ndata: b\r\n", b"\r\n") == [ev("a\nb")]


def test_cr_at_chunk_end_followed_by_text_ends_the_line() -> None:
    assert decode_all(b"data: a\r", b"data: b\r", b"\r") == [ev("a\nb")]


def test_trailing_cr_dispatches_without_waiting_for_more_bytes() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"data: a\r\r") == [ev("a")]


def test_blank_line_split_from_its_event_dispatches_on_arrival() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"data: a\n") == []
    assert decoder.decode(b"\n") == [ev("a")]


def test_every_line_end_fed_one_byte_at_a_time() -> None:
    stream = b"data: a\r\ndata: b\rdata: c\n\r\n"
    assert decode_all(*bytewise(stream)) == [ev("a\nb\nc")]


# --- byte order mark --------------------------------------------------------------------------


def test_leading_bom_is_stripped() -> None:
    assert decode_all(BOM + b"data: a\n\n") == [ev("a")]


def test_leading_bom_split_across_chunks_is_stripped() -> None:
    assert decode_all(b"\xef", b"\xbb", b"\xbfdata: a\n\n") == [ev("a")]
    assert decode_all(b"\xef\xbb", b"\xbf", b"data: a\n\n") == [ev("a")]


def test_only_one_leading_bom_is_stripped() -> None:
    # The second BOM is part of the first field name, which is then unknown.
    assert decode_all(BOM + BOM + b"data: a\n\ndata: b\n\n") == [ev("b")]


def test_bom_later_in_the_stream_is_data() -> None:
    assert decode_all(b"data: a\n\n", BOM + b"data: b\n\ndata: " + BOM + b"c\n\n") == [
        ev("a"),
        ev("\ufeffc"),
    ]


def test_incomplete_bom_is_not_stripped() -> None:
    # "\xef\xbb" then a line end: a line whose field name is a replacement character.
    assert decode_all(b"\xef\xbb", b"\ndata: a\n\n") == [ev("a")]
    assert decode_all(b"\xef\xbbdata: a\n\n") == []


def test_short_first_chunk_that_is_not_a_bom_is_kept() -> None:
    assert decode_all(b"d", b"at", b"a: a\n\n") == [ev("a")]


def test_empty_chunks_at_the_start_do_not_end_the_bom_window() -> None:
    assert decode_all(b"", b"\xef", b"", b"\xbb\xbf", b"data: a\n\n") == [ev("a")]


# --- comments ---------------------------------------------------------------------------------


def test_comment_lines_are_ignored() -> None:
    assert decode_all(b": hello\ndata: a\n:\n:data: b\ndata: c\n\n") == [ev("a\nc")]


def test_keep_alive_comments_between_events_dispatch_nothing() -> None:
    stream = b": keep-alive\n\ndata: a\n\n: keep-alive\n\n: keep-alive\n\ndata: b\n\n"
    assert decode_all(stream) == [ev("a"), ev("b")]


# --- field parsing ----------------------------------------------------------------------------


def test_field_without_colon_has_empty_value() -> None:
    assert decode_all(b"data\n\n") == [ev("")]
    assert decode_all(b"data\ndata\n\n") == [ev("\n")]
    assert decode_all(b"event\ndata: a\n\n") == [ev("a")]


def test_only_one_space_after_the_colon_is_removed() -> None:
    assert decode_all(b"data:a\n\n") == [ev("a")]
    assert decode_all(b"data: a\n\n") == [ev("a")]
    assert decode_all(b"data:  a \n\n") == [ev(" a ")]
    assert decode_all(b"event:  x\ndata:\ta\n\n") == [ev("\ta", event=" x")]


def test_value_may_contain_colons() -> None:
    assert decode_all(b'data: {"a": 1}\n\n') == [ev('{"a": 1}')]


def test_field_names_are_case_sensitive() -> None:
    assert decode_all(b"Data: a\nDATA: b\ndata: c\n\n") == [ev("c")]


def test_field_name_with_space_before_colon_is_unknown() -> None:
    assert decode_all(b"data : a\ndata: b\n\n") == [ev("b")]


def test_unknown_fields_are_ignored() -> None:
    assert decode_all(b"foo: bar\ndata: a\nbaz\n\n") == [ev("a")]


# --- event ------------------------------------------------------------------------------------


def test_event_field_sets_the_type() -> None:
    assert decode_all(b"event: response.created\ndata: a\n\n") == [
        ev("a", event="response.created")
    ]


def test_event_type_defaults_to_message() -> None:
    assert decode_all(b"data: a\n\n")[0].event == "message"


def test_empty_event_field_means_message() -> None:
    assert decode_all(b"event: x\nevent:\ndata: a\n\n") == [ev("a")]


def test_last_event_field_in_a_block_wins() -> None:
    assert decode_all(b"event: x\nevent: y\ndata: a\n\n") == [ev("a", event="y")]


def test_event_type_does_not_carry_over_to_the_next_event() -> None:
    assert decode_all(b"event: x\ndata: a\n\ndata: b\n\n") == [ev("a", event="x"), ev("b")]


# --- data -------------------------------------------------------------------------------------


def test_multiline_data_is_joined_with_newlines() -> None:
    assert decode_all(b"data: a\ndata: b\ndata: c\n\n") == [ev("a\nb\nc")]


def test_empty_data_field_dispatches_an_event_with_empty_data() -> None:
    assert decode_all(b"data:\n\n") == [ev("")]


def test_only_one_trailing_newline_is_stripped_from_data() -> None:
    assert decode_all(b"data: a\ndata:\n\n") == [ev("a\n")]
    assert decode_all(b"data:\ndata:\ndata:\n\n") == [ev("\n\n")]


# --- id ---------------------------------------------------------------------------------------


def test_id_sets_the_last_event_id_which_persists_across_events() -> None:
    decoder = SSEDecoder()
    events = decoder.decode(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n")
    assert events == [ev("a", id="1"), ev("b", id="1"), ev("c", id="2")]
    assert decoder.last_event_id == "2"


def test_id_field_order_within_the_block_does_not_matter() -> None:
    assert decode_all(b"data: a\nid: 9\n\n") == [ev("a", id="9")]


def test_id_containing_null_is_ignored() -> None:
    decoder = SSEDecoder()
    events = decoder.decode(b"id: 1\n\nid: 2\x003\ndata: a\n\n")
    assert events == [ev("a", id="1")]
    assert decoder.last_event_id == "1"


def test_empty_id_resets_the_last_event_id() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"id: 1\ndata: a\n\nid\ndata: b\n\n") == [ev("a", id="1"), ev("b")]
    assert decoder.last_event_id == ""


def test_id_in_a_block_without_data_still_sets_the_last_event_id() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"id: 5\n\n") == []
    assert decoder.last_event_id == "5"
    assert decoder.decode(b"data: a\n\n") == [ev("a", id="5")]


def test_id_set_before_an_unterminated_event_is_kept_at_flush() -> None:
    decoder = SSEDecoder()
    decoder.decode(b"id: 7\ndata: a\n")
    assert decoder.flush() == []
    assert decoder.last_event_id == "7"


# --- retry ------------------------------------------------------------------------------------


def test_retry_of_ascii_digits_is_reported() -> None:
    assert decode_all(b"retry: 3000\ndata: a\n\n") == [ev("a", retry=3000)]
    assert decode_all(b"retry: 0042\ndata: a\n\n") == [ev("a", retry=42)]


@pytest.mark.parametrize(
    "value",
    [b"", b" 100", b"100 ", b"1.5", b"-1", b"+1", b"1e3", b"abc", "\u0661\u0662".encode()],
)
def test_retry_that_is_not_all_ascii_digits_is_ignored(value: bytes) -> None:
    assert decode_all(b"retry: 10\nretry: " + value + b"\ndata: a\n\n") == [ev("a", retry=10)]


def test_retry_with_more_digits_than_int_converts_is_ignored() -> None:
    assert decode_all(b"retry: " + b"9" * 10_000 + b"\ndata: a\n\n") == [ev("a")]


def test_retry_does_not_carry_over_to_the_next_event() -> None:
    assert decode_all(b"retry: 5\ndata: a\n\ndata: b\n\n") == [ev("a", retry=5), ev("b")]


# --- dispatch ---------------------------------------------------------------------------------


def test_blank_line_with_empty_data_buffer_dispatches_nothing() -> None:
    assert decode_all(b"event: x\n\n") == []
    assert decode_all(b"\n\n\n") == []
    assert decode_all(b"retry: 5\nid: 1\n\n") == []


def test_blank_line_with_empty_data_buffer_resets_the_event_type() -> None:
    assert decode_all(b"event: x\n\ndata: a\n\n") == [ev("a")]


def test_extra_blank_lines_between_events_dispatch_nothing() -> None:
    assert decode_all(b"data: a\n\n\n\n\ndata: b\n\n") == [ev("a"), ev("b")]


def test_events_are_returned_in_stream_order() -> None:
    stream = b"".join(b"data: %d\n\n" % i for i in range(100))
    assert [e.data for e in decode_all(stream)] == [str(i) for i in range(100)]


# --- end of stream ----------------------------------------------------------------------------


def test_unterminated_last_event_is_discarded_at_flush() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"data: a\n\ndata: b\n") == [ev("a")]
    assert decoder.flush() == []


def test_unterminated_last_line_is_discarded_at_flush() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"data: a\n\ndata: b") == [ev("a")]
    assert decoder.flush() == []


def test_flush_resets_for_a_new_stream_but_keeps_the_last_event_id() -> None:
    decoder = SSEDecoder()
    decoder.decode(b"id: 3\ndata: lost")
    assert decoder.flush() == []
    # A new stream: a leading BOM is stripped again, nothing of the old one leaks in.
    assert decoder.decode(BOM + b"data: b\n\n") == [ev("b", id="3")]
    assert decoder.last_event_id == "3"


# --- UTF-8 ------------------------------------------------------------------------------------


def test_invalid_utf8_becomes_replacement_characters() -> None:
    stream = b"event: \xff\nid: \xc3\ndata: a\xffb\xe2\x82\ndata: \xed\xa0\x80\n\n"
    [event] = decode_all(stream)
    assert event.event == "\ufffd"
    assert event.id == "\ufffd"
    assert event.data == b"a\xffb\xe2\x82\n\xed\xa0\x80".decode("utf-8", "replace")
    assert event.data.startswith("a\ufffdb\ufffd\n")


def test_multibyte_characters_split_across_chunks() -> None:
    text = "héllo € 𝄞 日本"
    stream = b"event: t\xc3\xa9\ndata: " + text.encode() + b"\n\n"
    assert decode_all(*bytewise(stream)) == [ev(text, event="té")]


# --- size limit -------------------------------------------------------------------------------


def test_event_within_the_limit_is_accepted() -> None:
    # The data buffer of "data: abc" is "abc\n": 4 bytes.
    assert decode_all(b"data: abc\n\n", max_event_bytes=4) == [ev("abc")]
    with pytest.raises(EventTooLarge):
        decode_all(b"data: abc\n\n", max_event_bytes=3)


def test_event_too_large_is_raised_with_a_clear_message() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    with pytest.raises(EventTooLarge) as info:
        decoder.decode(b"data: " + b"x" * 200 + b"\n\n")
    assert isinstance(info.value, StreamError)
    assert info.value.limit == 100
    assert info.value.size > 100
    assert "100 bytes" in str(info.value)


def test_event_too_large_then_decoder_recovers() -> None:
    decoder = SSEDecoder(max_event_bytes=1000)
    with pytest.raises(EventTooLarge):
        decoder.decode(b"data: " + b"x" * 2000 + b"\ndata: more\n\n")
    assert decoder.decode(b"data: ok\n\n") == [ev("ok")]


def test_oversized_event_followed_by_normal_event_in_the_same_chunk() -> None:
    decoder = SSEDecoder(max_event_bytes=1000)
    stream = b"data: before\n\ndata: " + b"x" * 2000 + b"\n\ndata: after\n\ndata: par"
    with pytest.raises(EventTooLarge):
        decoder.decode(stream)
    # Events the failing chunk completed come out of the next call, before the new ones.
    assert decoder.decode(b"tial\n\n") == [ev("before"), ev("after"), ev("partial")]


def test_events_held_back_by_an_error_are_returned_by_flush() -> None:
    decoder = SSEDecoder(max_event_bytes=10)
    with pytest.raises(EventTooLarge):
        decoder.decode(b"data: a\n\ndata: 0123456789\n\ndata: b\n\n")
    assert decoder.flush() == [ev("a"), ev("b")]


def test_oversized_event_across_many_chunks_is_dropped_up_to_its_blank_line() -> None:
    decoder = SSEDecoder(max_event_bytes=1000)
    raised = 0
    events: list[ServerSentEvent] = []
    chunks = [b"event: big\n"] + [b"data: " + b"y" * 94 + b"\n"] * 30 + [b"\ndata: next\n\n"]
    for chunk in chunks:
        try:
            events += decoder.decode(chunk)
        except EventTooLarge:
            raised += 1
    assert raised == 1
    # Nothing of the oversized event leaks into the next one, not even its type.
    assert events == [ev("next")]


def test_many_empty_data_lines_count_toward_the_limit() -> None:
    decoder = SSEDecoder(max_event_bytes=1000)
    with pytest.raises(EventTooLarge):
        decoder.decode(b"data\n" * 2000)


def test_line_without_newline_over_the_limit_raises_and_memory_stays_bounded() -> None:
    decoder = SSEDecoder(max_event_bytes=64 * 1024)
    raised = 0
    tracemalloc.start()
    try:
        for _ in range(1000):  # 4 MB that never sends a newline
            try:
                decoder.decode(b"data: " + b"z" * 4090)
            except EventTooLarge:
                raised += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert raised == 1
    assert peak < 1024 * 1024
    # The oversized line ends, then its event; the stream then decodes normally again.
    assert decoder.decode(b"\ndata: same event\n\ndata: ok\n\n") == [ev("ok")]


def test_rest_of_an_oversized_line_is_never_read_as_a_field() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    with pytest.raises(EventTooLarge):
        decoder.decode(b"data: " + b"x" * 200)
    assert decoder.decode(b"id: bogus\ndata: same event\n\ndata: ok\n\n") == [ev("ok")]
    assert decoder.last_event_id == ""


def test_oversized_unterminated_line_in_a_block_with_buffered_data() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    assert decoder.decode(b"data: " + b"a" * 60 + b"\ndata: ") == []
    with pytest.raises(EventTooLarge):
        decoder.decode(b"b" * 60)
    assert decoder.decode(b"\n\ndata: c\n\n") == [ev("c")]


@pytest.mark.timeout(60)
def test_one_megabyte_event_fed_one_byte_at_a_time_is_linear() -> None:
    # Re-joining the buffered line on every byte would copy ~5e11 bytes here and never finish.
    payload = b"q" * (1024 * 1024)
    decoder = SSEDecoder()
    for piece in bytewise(b"data: " + payload):
        assert decoder.decode(piece) == []
    assert decoder.decode(b"\n") == []
    [event] = decoder.decode(b"\n")
    assert len(event.data) == len(payload)
    assert event.data == payload.decode()


# --- properties -------------------------------------------------------------------------------

_line_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\n"),
    max_size=12,
)
_raw_bytes = st.binary(max_size=6).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
_field_name = st.sampled_from(["data", "event", "id", "retry", "", "Data", "foo", "data "])
_separator = st.sampled_from(["", ":", ": ", ":  "])
_value = st.one_of(
    _line_text,
    st.from_regex(r"\A[0-9]{1,6}\Z"),
    st.sampled_from(["", " ", "\x00", "a\x00b", "message", "\ufeff", "response.created"]),
)
_line = st.one_of(
    st.builds(lambda n, s, v: (n + s + v).encode(), _field_name, _separator, _value),
    st.builds(lambda v: (":" + v).encode(), _line_text),  # comments
    st.just(b""),  # blank lines
    st.just(b""),
    _raw_bytes,  # invalid UTF-8 and anything else
)
_line_end = st.sampled_from([b"\n", b"\r", b"\r\n"])


@st.composite
def event_streams(draw: st.DrawFn) -> bytes:
    parts = [BOM] if draw(st.booleans()) else []
    for line, end in draw(st.lists(st.tuples(_line, _line_end), max_size=40)):
        parts += [line, end]
    parts.append(draw(st.sampled_from([b"", b"data: unterminated", b"data: x\n"])))
    return b"".join(parts)


@st.composite
def chunkings(draw: st.DrawFn, stream: bytes) -> list[bytes]:
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    bounds = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_chunking_gives_the_same_events_as_feeding_whole(data: st.DataObject) -> None:
    stream = data.draw(event_streams())
    chunks = data.draw(chunkings(stream))
    whole = SSEDecoder()
    expected = whole.decode(stream) + whole.flush()
    chunked = SSEDecoder()
    got: list[ServerSentEvent] = []
    for chunk in chunks:
        got += chunked.decode(chunk)
    got += chunked.flush()
    assert got == expected
    assert chunked.last_event_id == whole.last_event_id


@settings(max_examples=300, deadline=None)
@given(stream=event_streams())
def test_decoder_matches_a_literal_reading_of_the_spec(stream: bytes) -> None:
    decoder = SSEDecoder()
    events = decoder.decode(stream) + decoder.flush()
    assert (events, decoder.last_event_id) == spec_reference(stream)
    assert decode_all(*bytewise(stream)) == events


@settings(max_examples=200, deadline=None)
@given(stream=st.binary(max_size=300), data=st.data())
def test_arbitrary_bytes_never_raise_and_are_chunking_invariant(
    stream: bytes, data: st.DataObject
) -> None:
    assert decode_all(*data.draw(chunkings(stream))) == decode_all(stream)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), limit=st.integers(1, 40))
def test_a_size_limit_only_ever_drops_whole_events(data: st.DataObject, limit: int) -> None:
    stream = data.draw(event_streams())
    unlimited = [(e.event, e.data) for e in decode_all(stream)]
    decoder = SSEDecoder(max_event_bytes=limit)
    kept: list[ServerSentEvent] = []
    for chunk in data.draw(chunkings(stream)):
        try:
            kept += decoder.decode(chunk)
        except EventTooLarge:
            pass
    kept += decoder.flush()
    assert all(len(e.data) < limit for e in kept)  # each character came from at least a byte
    remaining = iter(unlimited)
    assert all((e.event, e.data) in remaining for e in kept), "not a subsequence"

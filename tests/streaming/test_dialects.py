"""Provider dialects the core absorbs: one fixture per known deviation, replayed through the relay's
own pipeline (streaming/replay.py). Each fixture is a stream in OpenAI's shape (a real capture or
a recorded simulator stream) rewritten the way that provider writes it (simulator/dialects.py),
so the plain stream is the reference: the same text, an honest status, honest counters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from responses_app.simulator.dialects import DONE_TRAILER, NAMES, NO_UPDATE, DialectWriter, response_id
from responses_app.streaming.assembler import Assembler
from responses_app.streaming.pipeline import StreamPipeline
from responses_app.streaming.replay import ReplayResult, replay_bytes
from tests.conftest import REAL_STREAMS, require_real_streams

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sim"
SIM = ["sim-text.sse", "sim-reasoning.sse", "sim-function.sse", "sim-citations.sse", "sim-refusal.sse"]
REAL = ["openai-dotnet__plain-text-hello.sse", "pydantic-ai__function-call-gpt5-reasoning.sse",
        "vercel-ai__lmstudio-multi-paragraph-text.sse", "pydantic-ai__multi-paragraph-text-gpt41.sse"]


def events_of(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: {")]


def to_sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def in_dialect(body: bytes, dialect: str) -> bytes:
    writer = DialectWriter(dialect)
    shaped = [s for e in events_of(body) if (s := writer.shape(dict(e))) is not None]
    return to_sse(shaped) + (DONE_TRAILER if dialect == "litellm" else b"")


def texts(result: ReplayResult) -> list[str]:
    return [b.get("text", "") for b in result.view["blocks"] if b["kind"] in ("text", "refusal", "reasoning")]


def honest(result: ReplayResult) -> None:
    assert (result.stats.duplicates, result.stats.gaps, result.stats.unknown) == (0, 0, 0)
    assert result.problems == []  # nothing malformed, `[DONE]` included


def source(name: str) -> bytes:
    if name.startswith("sim-"):
        return (FIXTURES / name).read_bytes()
    require_real_streams()
    return (REAL_STREAMS / name).read_bytes()


@pytest.mark.parametrize("dialect", NAMES)
@pytest.mark.parametrize("name", SIM + REAL)
def test_every_dialect_of_every_stream_assembles_to_the_plain_text(dialect: str, name: str) -> None:
    body = source(name)
    plain = replay_bytes(body)
    shaped = replay_bytes(in_dialect(body, dialect))
    assert texts(shaped) == texts(plain)
    assert [b["kind"] for b in shaped.view["blocks"]] == [b["kind"] for b in plain.view["blocks"]]
    assert shaped.status == plain.status and shaped.terminal
    honest(shaped)


# --- sequence numbers -------------------------------------------------------------------------


def test_every_event_numbered_zero_is_applied_in_arrival_order() -> None:
    body = in_dialect((FIXTURES / "sim-text.sse").read_bytes(), "litellm")
    events = events_of(body)
    assert {e["sequence_number"] for e in events} == {0} and len(events) > 20
    result = replay_bytes(body)
    assert texts(result) == texts(replay_bytes((FIXTURES / "sim-text.sse").read_bytes()))
    assert result.status == "completed" and result.stats.events == len(events)
    assert result.stats.unnumbered and result.stats.duplicates == 0
    honest(result)


def test_a_repeat_of_the_first_event_is_still_a_duplicate() -> None:
    events = events_of(in_dialect((FIXTURES / "sim-text.sse").read_bytes(), "litellm"))
    result = replay_bytes(to_sse([events[0], *events]))  # the same event twice, then the rest
    assert result.stats.duplicates == 1 and result.stats.unnumbered
    assert texts(result) == texts(replay_bytes((FIXTURES / "sim-text.sse").read_bytes()))


def test_numbering_providers_keep_their_dedup() -> None:
    events = events_of((FIXTURES / "sim-text.sse").read_bytes())
    doubled = replay_bytes(to_sse([e for e in events for _ in range(2)]))
    assert doubled.stats.duplicates == len(events) and not doubled.stats.unnumbered
    late = replay_bytes(to_sse([*events[:10], events[5], *events[10:]]))  # a stale one mid-stream
    assert late.stats.duplicates == 1 and late.stats.restarts == 0
    assert texts(doubled) == texts(late) == texts(replay_bytes(to_sse(events)))


def test_numbering_that_restarts_at_zero_mid_stream_is_not_a_duplicate() -> None:
    events = events_of((FIXTURES / "sim-text.sse").read_bytes())
    cut = len(events) // 2  # in the middle of the message's deltas
    renumbered = [*events[:cut], *({**e, "sequence_number": n} for n, e in enumerate(events[cut:]))]
    result = replay_bytes(to_sse(renumbered))
    assert texts(result) == texts(replay_bytes(to_sse(events)))
    assert result.stats.restarts == 1 and result.status == "completed"
    assert any("restart" in a for a in result.stats.anomalies)
    honest(result)


def test_numbering_per_item_restarts_with_each_item() -> None:
    body = in_dialect((FIXTURES / "sim-reasoning.sse").read_bytes(), "llama.cpp")
    result = replay_bytes(body)
    assert result.stats.restarts == 2  # the reasoning item, then the message
    assert texts(result) == texts(replay_bytes((FIXTURES / "sim-reasoning.sse").read_bytes()))
    honest(result)


def test_a_number_nested_in_the_response_or_item_is_arrival_order() -> None:
    body = in_dialect((FIXTURES / "sim-text.sse").read_bytes(), "vllm")
    events = events_of(body)
    assert all("sequence_number" not in e for e in events)
    assert "sequence_number" in events[0]["response"]
    assert not any(e["type"].endswith(".done") for e in events)
    result = replay_bytes(body)
    assert result.status == "completed"
    assert texts(result) == texts(replay_bytes((FIXTURES / "sim-text.sse").read_bytes()))
    honest(result)


# --- items and parts --------------------------------------------------------------------------


def test_no_added_events_and_foreign_item_ids_give_one_block_per_item() -> None:
    plain = replay_bytes((FIXTURES / "sim-reasoning.sse").read_bytes())
    body = in_dialect((FIXTURES / "sim-reasoning.sse").read_bytes(), "open-responses-server")
    events = events_of(body)
    assert not any(e["type"].endswith(".added") for e in events)
    final_ids = {i["id"] for i in events[-1]["response"]["output"]}
    assert {e["item_id"] for e in events if "item_id" in e}.isdisjoint(final_ids)
    result = replay_bytes(body)
    assert [b["id"] for b in result.view["blocks"]] == [b["id"] for b in plain.view["blocks"]]
    assert texts(result) == texts(plain)
    assert [i["id"] for i in result.response["output"]] == [i["id"] for i in plain.response["output"]]
    honest(result)


def test_no_output_text_done_keeps_the_text_whole() -> None:
    body = in_dialect((FIXTURES / "sim-text.sse").read_bytes(), "llamastack")
    assert b"response.output_text.done" not in body
    assert texts(replay_bytes(body)) == texts(replay_bytes((FIXTURES / "sim-text.sse").read_bytes()))


# --- [DONE] -------------------------------------------------------------------------------------


def test_done_marker_ends_the_stream_at_every_split_point() -> None:
    body = (FIXTURES / "sim-text.sse").read_bytes() + DONE_TRAILER
    reference = replay_bytes((FIXTURES / "sim-text.sse").read_bytes())
    tail = len(body) - len(DONE_TRAILER) - 200  # every split point in and around the marker
    for cut in range(tail, len(body) + 1):
        pipeline = StreamPipeline()
        pipeline.feed(body[:cut])
        pipeline.feed(body[cut:])
        pipeline.finish()
        assert (pipeline.malformed, pipeline.problems) == (0, []), cut
        assert pipeline.assembler.status == "completed"
    for size in (1, 2, 3, 7, 64):
        result = replay_bytes(body, chunk_size=size)
        assert result.problems == [] and texts(result) == texts(reference)


def test_done_marker_in_websocket_frames_is_not_malformed() -> None:
    pipeline = StreamPipeline()
    for event in events_of((FIXTURES / "sim-text.sse").read_bytes()):
        pipeline.feed_event(json.dumps(event))
    pipeline.feed_event("[DONE]")
    assert pipeline.malformed == 0 and pipeline.assembler.status == "completed"


# --- a terminal response with an error ---------------------------------------------------------


def failing(dialect: str) -> ReplayResult:
    return replay_bytes(in_dialect((FIXTURES / "sim-failed.sse").read_bytes(), dialect))


def test_completed_with_an_error_is_failed_and_keeps_the_streamed_text() -> None:
    plain = replay_bytes((FIXTURES / "sim-failed.sse").read_bytes())
    body = in_dialect((FIXTURES / "sim-failed.sse").read_bytes(), "open-responses-server")
    last = events_of(body)[-1]
    assert last["type"] == "response.completed" and last["response"]["status"] == "completed"
    assert last["response"]["error"]["code"] == "server_error"
    result = replay_bytes(body)
    assert result.status == "failed"
    assert result.view["meta"]["status"] == "failed"
    assert result.view["meta"]["error"]["code"] == "server_error"
    assert result.response["status"] == "failed" and result.response["error"]["code"] == "server_error"
    assert texts(result) == texts(plain) and NO_UPDATE not in json.dumps(result.view)
    assert NO_UPDATE not in json.dumps(result.response)


@pytest.mark.parametrize("error", ["the backend died", {"message": "no code"}, {"code": "boom", "message": "x"}])
def test_any_non_null_error_on_a_terminal_response_is_failure(error: Any) -> None:
    events = events_of((FIXTURES / "sim-text.sse").read_bytes())
    last = events[-1]
    events[-1] = {**last, "response": {**last["response"], "error": error}}
    result = replay_bytes(to_sse(events))
    assert result.status == "failed"
    code = result.view["meta"]["error"]["code"]
    assert code == (error["code"] if isinstance(error, dict) and "code" in error else "upstream_error")
    assert texts(result) == texts(replay_bytes((FIXTURES / "sim-text.sse").read_bytes()))


def test_a_null_or_empty_error_is_success() -> None:
    events = events_of((FIXTURES / "sim-text.sse").read_bytes())
    for error in (None, {}):
        last = events[-1]
        events[-1] = {**last, "response": {**last["response"], "error": error}}
        assert replay_bytes(to_sse(events)).status == "completed"


def test_a_terminal_output_without_an_error_is_still_authoritative() -> None:
    events = events_of((FIXTURES / "sim-text.sse").read_bytes())
    final = events[-1]["response"]
    final["output"][0]["content"][0]["text"] = "The final word."
    assert texts(replay_bytes(to_sse(events))) == ["The final word."]


# --- long ids ----------------------------------------------------------------------------------


def test_ids_hundreds_of_characters_long_pass_through_whole() -> None:
    long_id = response_id("litellm", "resp_abc")
    assert len(long_id) == 441
    item_id = "msg_" + "x" * 600
    events = events_of((FIXTURES / "sim-text.sse").read_bytes())
    body = json.dumps(events).replace(events[0]["response"]["id"], long_id)
    body = body.replace(events[-1]["response"]["output"][0]["id"], item_id)
    assembler = Assembler()
    assembler.feed_many(json.loads(body))
    assert assembler.response_id == long_id and assembler.view.meta["response_id"] == long_id
    assert assembler.response()["id"] == long_id
    assert assembler.response()["output"][0]["id"] == item_id
    assert assembler.status == "completed"


def test_foreign_item_ids_match_the_final_response_by_position() -> None:
    """Without any `output_item.done` either, the final Response is the first to name the ids."""
    plain = replay_bytes((FIXTURES / "sim-reasoning.sse").read_bytes())
    body = in_dialect((FIXTURES / "sim-reasoning.sse").read_bytes(), "open-responses-server")
    events = [e for e in events_of(body) if e["type"] != "response.output_item.done"]
    result = replay_bytes(to_sse(events))
    assert [b["id"] for b in result.view["blocks"]] == [b["id"] for b in plain.view["blocks"]]
    assert texts(result) == texts(plain)
    assert [i["id"] for i in result.response["output"]] == [i["id"] for i in plain.response["output"]]


def test_an_unknown_dialect_is_a_clear_400() -> None:
    from responses_app.simulator.api_errors import ApiError
    from responses_app.simulator.faults import parse_faults

    assert parse_faults({"sim.dialect": "llama.cpp"}).dialect == "llama.cpp"
    with pytest.raises(ApiError) as raised:
        parse_faults({"sim.dialect": "llama"})
    assert raised.value.status == 400 and b"open-responses-server" in raised.value.body()

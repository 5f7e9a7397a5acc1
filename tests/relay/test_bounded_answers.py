"""RELAY_MAX_ANSWER_CHARS through the real relay and the standalone simulator over loopback: an
answer of thirty 1 MB deltas ends `incomplete` (max_answer_chars) with what fits, the upstream is
stopped (a background response cancelled), the process's memory stays bounded, and every
checkpoint is written; the bound spans the rounds of an answer and every kind of delta."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import orjson
import pytest

from responses_app.checks import settings_check
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.streaming.transcript import Transcript
from responses_app.upstream.http import Upstream
from tests.relay.helpers import make_request, reload
from tests.upstream.test_websocket import hub_over_websocket  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

HUGE = {"sim.delta_chars": "1000000", "sim.tokens": "30"}  # thirty deltas of 1,000,000 characters


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def run_watching_rss(runner: StreamRunner) -> int:
    """Run the runner; the largest growth of this process's RSS seen meanwhile."""
    base = peak = rss_bytes()
    task = asyncio.get_running_loop().create_task(runner.run())
    while not task.done():
        peak = max(peak, rss_bytes())
        await asyncio.sleep(0.005)
    await task
    return max(peak, rss_bytes()) - base


@pytest.mark.parametrize("transport", ["sse", "websocket"])
async def test_thirty_megabyte_deltas_end_incomplete_with_memory_bounded(
        owner: Any, settings: Any, simulator_url: str, transport: str, hub_over_websocket: Any,  # noqa: F811
) -> None:
    settings.RELAY_UPSTREAM_TRANSPORT = "websocket" if transport == "websocket" else "aiohttp"
    settings.RELAY_MAX_ANSWER_CHARS = 2_000_000
    paced = {"sim.tokens_per_s": "5"}  # still generating when the bound is passed
    request = await make_request(owner, "sim-text", {**HUGE, **paced}, background=transport == "sse")
    runner = StreamRunner(str(request.pk), get_hub())
    growth = await asyncio.wait_for(run_watching_rss(runner), 120)
    saved = await reload(request)
    assert (saved.status, saved.incomplete_reason) == ("incomplete", "max_answer_chars")
    assert len(saved.final_text) == 2_000_000, "what fits is kept, to the character"
    assert runner.view.meta.get("incomplete_reason") == "max_answer_chars"
    assert growth < 80 * 2**20, f"RSS grew {growth / 2**20:.0f} MB for a 2,000,000-character answer"
    if transport == "sse":  # a background response is cancelled upstream, not left generating
        client = Upstream(base=simulator_url)
        final = await client.retrieve(saved.response_id)
        await client.aclose()
        assert final["status"] == "cancelled"


def test_the_bound_spans_rounds_and_every_kind_of_delta() -> None:
    transcript = Transcript(max_answer_chars=10)
    events = [
        {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress"}},
        {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
         "item": {"id": "rs_1", "type": "reasoning", "summary": []}},
        {"type": "response.reasoning_summary_text.delta", "sequence_number": 2, "item_id": "rs_1",
         "output_index": 0, "summary_index": 0, "delta": "abcdef"},
        {"type": "response.output_item.added", "sequence_number": 3, "output_index": 1,
         "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []}},
        {"type": "response.output_text.delta", "sequence_number": 4, "item_id": "msg_1", "output_index": 1,
         "content_index": 0, "delta": "ghijkl"},
        {"type": "response.output_text.delta", "sequence_number": 5, "item_id": "msg_1", "output_index": 1,
         "content_index": 0, "delta": "mnop"},
    ]
    step = None
    for event in events:
        step = transcript.feed_event(orjson.dumps(event).decode())
        if step.limited:
            break
    assert step is not None and step.limited and transcript.limit_reason == "max_answer_chars"
    assert transcript.final_text() == "ghij", "six of summary, four of answer: ten in all"
    transcript.next_response()
    later = {"type": "response.output_text.delta", "sequence_number": 0, "item_id": "msg_2", "output_index": 0,
             "content_index": 0, "delta": "more"}
    transcript.feed_event(orjson.dumps(later).decode())
    assert "more" not in transcript.final_text(), "the next round has no room left either"


@pytest.mark.parametrize("value", ["0", "many", 30_000_000])
def test_a_bad_bound_is_a_system_check_error(settings: Any, value: Any) -> None:
    settings.RELAY_MAX_ANSWER_CHARS = value
    errors = [m for m in settings_check() if "RELAY_MAX_ANSWER_CHARS" in m.msg]
    assert [m.id for m in errors] == ["responses_app.E002"]


def test_a_final_response_brings_no_more_than_the_bound() -> None:
    transcript = Transcript(max_answer_chars=10)
    transcript.feed_event(orjson.dumps({"type": "response.created", "sequence_number": 0,
                                        "response": {"id": "resp_1", "status": "in_progress"}}).decode())
    message = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": "x" * 50, "annotations": []}]}
    transcript.apply_final({"id": "resp_1", "status": "completed", "output": [message]})
    assert transcript.final_text() == "x" * 10
    assert transcript.limited and transcript.limit_reason == "max_answer_chars"

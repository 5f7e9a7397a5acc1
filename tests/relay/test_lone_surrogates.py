"""A provider that sends a lone surrogate escape in a delta, over real loopback HTTP: the request
completes with the delta's other characters and U+FFFD in its place, none counted malformed."""

from __future__ import annotations

from typing import Any

import pytest

from responses_app.models import ResponseRequest
from tests.relay.test_endings import relay, text_blocks
from tests.streaming.test_limits import items_stream, sse
from tests.upstreams import Reply, scripted_upstream

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def test_a_lone_surrogate_in_a_delta_keeps_the_rest_of_it(owner: Any) -> None:
    events = items_stream(1)
    events[3]["delta"] = "caf\u00e9 HIGH ok"
    events[4]["item"]["content"] = [{"type": "output_text", "text": "caf\u00e9 HIGH ok", "annotations": []}]
    events[-1]["response"]["output"] = [events[4]["item"]]
    body = sse(events).replace(b"HIGH", b"\\ud83d")
    async with scripted_upstream({"POST /v1/responses": Reply(body=body, chunk_size=7)}) as upstream:
        saved, runner = await relay(owner, upstream.base)
    assert saved.status == ResponseRequest.Status.COMPLETED
    assert text_blocks(runner.view.to_dict()) == ["caf\u00e9 \ufffd ok"]
    assert saved.final_text == "caf\u00e9 \ufffd ok"
    assert runner.transcript.pipeline.malformed == 0

"""A dropped upstream connection is never a Stop, over WebSocket mode as over SSE, against the
standalone simulator over real loopback sockets: a background request survives the drop and ends
with the same text as over SSE; a response the provider ended with its connection ends `failed`
with `upstream_connection_lost`, and the page offers Regenerate for it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from tests.relay.helpers import make_request, reload
from tests.relay.test_endings import segments_of
from tests.upstream.test_websocket import PACED, hub_over_websocket, relay  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

DROP = {"sim.drop_after": "60", **PACED}


async def test_a_drop_over_websocket_mode_completes_with_the_text_over_sse(owner: Any, simulator_url: str) -> None:
    ends = {}
    for transport in ("sse", "websocket"):
        saved, _ = await relay(owner, transport, simulator_url, "sim-long", {**DROP, "sim.tokens": "200"},
                               background=True)
        ends[transport] = saved
        assert saved.status == "completed", transport
        assert [s.kind for s in await segments_of(saved)] == ["initial", "resume"], transport
        assert saved.disconnects == 1
    assert ends["websocket"].final_text == ends["sse"].final_text
    assert len(ends["sse"].final_text) > 600, "the drop came early in the answer"


@pytest.mark.parametrize("transport", ["sse", "websocket"])
async def test_a_response_lost_with_its_connection_is_named_never_cancelled(
        owner: Any, simulator_url: str, transport: str) -> None:
    saved, runner = await relay(owner, transport, simulator_url, "sim-long", {**DROP, "sim.tokens": "200"},
                                background=False)
    assert saved.status == "failed", "a dropped connection is not a Stop"
    assert saved.error_code == "upstream_connection_lost"
    assert "connection to the model provider was lost" in saved.error_message
    assert [(s.kind, s.outcome) for s in await segments_of(saved)] == [("initial", "dropped"),
                                                                        ("reconcile", "failed")]
    assert runner.view.meta["error"]["code"] == "upstream_connection_lost"
    assert saved.final_text, "what arrived is kept"


async def test_the_page_offers_regenerate_for_a_lost_connection(owner: Any, simulator_url: str,
                                                                hub_over_websocket: Any) -> None:  # noqa: F811
    request = await make_request(owner, "sim-long", {**DROP, "sim.tokens": "200"}, background=False)
    await StreamRunner(str(request.pk), get_hub()).run()
    saved = await reload(request)
    assert (saved.status, saved.error_code) == ("failed", "upstream_connection_lost")
    client = Client()
    await sync_to_async(client.force_login)(owner)
    page = await sync_to_async(client.get)(reverse("responses_app:chat-turn",
                                                   args=[saved.conversation_id, saved.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "<strong>Connection lost</strong>" in html
    assert "regenerate-form" in html and ">Regenerate</button>" in html


async def test_a_response_that_cannot_be_streamed_again_is_awaited_to_its_full_answer(
        owner: Any, simulator_url: str) -> None:
    # Background, but the provider refuses to stream it again: the reconcile finds it still
    # running and asks again until it ends, rather than giving up at once (`unknown`).
    metadata = {"sim.drop_after": "12", "sim.resume_max_age_s": "0", "sim.tokens": "400",
                "sim.tokens_per_s": "60"}
    saved, _ = await relay(owner, "sse", simulator_url, "sim-long", metadata, background=True)
    whole, _ = await relay(owner, "sse", simulator_url, "sim-long", {"sim.tokens": "400"}, background=True)
    assert saved.status == "completed", saved.error_message
    assert saved.final_text == whole.final_text
    assert [s.kind for s in await segments_of(saved)][-1] == "reconcile"


async def test_stop_while_the_reconcile_waits_cancels_at_once(owner: Any, simulator_url: str) -> None:
    metadata = {"sim.drop_after": "12", "sim.resume_max_age_s": "0", "sim.tokens": "3000",
                "sim.tokens_per_s": "60"}
    request = await make_request(owner, "sim-long", metadata, background=True)
    runner = StreamRunner(str(request.pk), get_hub())
    task = asyncio.get_running_loop().create_task(runner.run())
    async with asyncio.timeout(20):
        while "reconcile" not in [s.kind for s in await segments_of(request)]:
            await asyncio.sleep(0.05)
        runner.cancel()
        await task
    saved = await reload(request)
    assert saved.status == "cancelled", "Stop pressed while the relay waited for the provider"

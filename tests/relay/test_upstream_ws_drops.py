"""A dropped upstream connection is never a Stop, over WebSocket mode as over SSE, against the
standalone simulator over real loopback sockets: a background request survives the drop and ends
with the same text as over SSE; a response the provider ended with its connection ends `failed`
with `upstream_connection_lost`, and the page offers Regenerate for it."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from responses_app.relay.hub import get_hub
from responses_app.relay.runner import StreamRunner
from tests.relay.helpers import make_request, reload
from tests.relay.test_endings import segments_of
from tests.relay.test_upstream_websocket import PACED, hub_over_websocket, relay  # noqa: F401

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

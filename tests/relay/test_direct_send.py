"""Frames a consumer writes itself (wsthreads.frame_writer), on the server the relay runs on.

Under project.serve (uvicorn, websockets-sansio) a viewer's frame goes out from the hub's
`offer` when nothing is queued and the transport takes it, without waking the socket's writer
task; everything else (a paused transport, a snapshot in flight, frames already queued) goes
through the outbox and the writer. Here a real uvicorn server runs project.asgi on a free port
in the test's loop, a real websocket client watches a streamed answer, and the client's view,
rebuilt from the frames alone, must be the committed one, with both paths used."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from responses_app import selectors
from responses_app.relay.hub import get_hub
from responses_app.streaming.view import apply_patch
from responses_app.streaming.wire import PROTOCOL, decode
from responses_app.wsthreads import frame_writer
from tests.relay.helpers import make_request, reload
from tests.relay.test_connect import session_of
from tests.servers import free_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


@pytest.fixture
async def server() -> AsyncIterator[int]:
    from project.asgi import application

    port = free_port()
    config = uvicorn.Config(application, host="127.0.0.1", port=port, ws="websockets-sansio", lifespan="off",
                            log_level="warning")
    srv = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(srv.serve())
    async with asyncio.timeout(20):
        while not srv.started:
            await asyncio.sleep(0.01)
    yield port
    srv.should_exit = True
    await asyncio.wait_for(task, 20)


async def test_a_viewer_gets_every_frame_in_order_from_offer_and_from_its_writer(
        owner: Any, server: int) -> None:
    session = await session_of(owner)
    request = await make_request(owner, "sim-long", {"sim.tokens": "400", "sim.tokens_per_s": "200"}, background=False)
    key = str(request.pk)
    hub = get_hub()
    view: dict[str, Any] | None = None
    patches = snapshots = 0
    paused_for: list[int] = []
    async with connect(f"ws://127.0.0.1:{server}/ws/requests/{key}/?v={PROTOCOL}",
                       additional_headers={"Origin": f"http://127.0.0.1:{server}",
                                           "Cookie": f"sessionid={session}"}) as ws:
        async with asyncio.timeout(60):
            async for raw in ws:
                message = decode(raw)
                if message["type"] == "snapshot":
                    snapshots += 1
                    view = message["view"]
                elif message["type"] == "patch":
                    assert view is not None and message["base"] == view["revision"], "a gap or a frame out of order"
                    apply_patch(view, message)
                    patches += 1
                    if patches == 5:
                        # The server's transport paused (as when the client reads slowly): frames
                        # queue for the writer, which sends them, in order, once it resumes.
                        [consumer] = hub.viewers[key]
                        protocol = consumer._frame_send().__self__
                        protocol.pause_writing()
                        paused_for.append(consumer.direct_frames)
                        await asyncio.sleep(0.3)
                        assert consumer.direct_frames == paused_for[0]
                        protocol.resume_writing()
                elif message["type"] == "terminal":
                    [consumer] = hub.viewers[key]
                    direct = consumer.direct_frames
                    break
    saved = await reload(request)
    assert saved.status == "completed" and snapshots == 1
    assert view == await sync_to_async(selectors.view_latest)(request=saved)
    text = "".join(b["text"] for b in view["blocks"] if b["kind"] == "text")
    assert text == saved.final_text and len(text) > 1000
    # Most frames went out from offer; those queued while paused went through the writer.
    assert patches > 20 and patches // 2 < direct < patches


def test_servers_it_does_not_know_get_no_frame_writer() -> None:
    async def send(message: dict[str, Any]) -> None:  # e.g. Daphne's, or a test communicator's
        pass

    assert frame_writer(send) is None

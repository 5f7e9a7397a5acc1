"""The websocket consumer through Channels' communicator, against the simulator over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from responses_app.models import Checkpoint, ResponseRequest, Segment
from tests.relay.helpers import Watcher, connect, make_request, reload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def test_snapshot_then_patches_then_terminal(owner: Any) -> None:
    request = await make_request(owner, "sim-text")
    communicator = await connect(owner, request.pk)
    connected, _ = await communicator.connect()
    assert connected
    watcher = Watcher(communicator)
    first = await watcher.receive()
    assert first["type"] == "snapshot"
    terminal = await watcher.until_terminal()
    assert terminal["status"] == "completed"
    kinds = [m["type"] for m in watcher.messages]
    assert kinds[0] == "snapshot" and kinds[-1] == "terminal" and "patch" in kinds
    revisions = [m["revision"] for m in watcher.messages if m["type"] == "patch"]
    assert revisions == sorted(revisions), "patches arrive in revision order"
    saved = await reload(request)
    assert saved.status == ResponseRequest.Status.COMPLETED
    assert saved.response_id.startswith("resp_")
    assert watcher.text() == saved.final_text and saved.final_text
    assert watcher.view["revision"] == terminal["revision"]
    await communicator.disconnect()


async def test_outsider_is_closed_with_4403(owner: Any, outsider: Any) -> None:
    request = await make_request(owner, "sim-text")
    communicator = await connect(outsider, request.pk)
    connected, _ = await communicator.connect()
    assert connected  # accepted, then closed: browsers see the code instead of a bare 1006
    assert await communicator.receive_output(5) == {"type": "websocket.close", "code": 4403}


async def test_anonymous_is_closed_with_4403(owner: Any) -> None:
    from django.contrib.auth.models import AnonymousUser

    request = await make_request(owner, "sim-text")
    communicator = await connect(AnonymousUser(), request.pk)
    await communicator.connect()
    assert await communicator.receive_output(5) == {"type": "websocket.close", "code": 4403}


async def test_staff_may_watch(owner: Any, staff: Any) -> None:
    request = await make_request(owner, "sim-text")
    communicator = await connect(staff, request.pk)
    connected, _ = await communicator.connect()
    assert connected
    await Watcher(communicator).until_terminal()
    await communicator.disconnect()


async def test_reconnect_mid_stream_sees_committed_view_and_same_final_text(owner: Any) -> None:
    request = await make_request(owner, "sim-long", {"sim.tokens_per_s": "400", "sim.tokens": "900"})
    first = await connect(owner, request.pk)
    await first.connect()
    watcher = Watcher(first)
    while watcher.view is None or not watcher.text():
        await watcher.receive()
    await first.disconnect()  # closing the tab does not stop the runner

    second = await connect(owner, request.pk, "reconnect=1")
    await second.connect()
    rejoined = Watcher(second)
    snapshot = await rejoined.receive()
    assert snapshot["type"] == "snapshot" and snapshot["view"]["blocks"], "the committed view at once"
    await rejoined.until_terminal(60)
    saved = await reload(request)
    assert saved.status == "completed"
    assert rejoined.text() == saved.final_text
    assert saved.viewer_connections == 2 and saved.reconnects == 1
    segments = await sync_to_async(lambda: Segment.objects.filter(request=request).count())()
    assert segments == 1, "a reconnect never starts a new upstream call"
    await second.disconnect()


async def test_two_tabs_share_one_upstream_stream(owner: Any) -> None:
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "200"})
    tabs = [await connect(owner, request.pk) for _ in range(2)]
    watchers = []
    for tab in tabs:
        await tab.connect()
        watchers.append(Watcher(tab))
    for watcher in watchers:
        await watcher.until_terminal()
    assert watchers[0].text() == watchers[1].text() != ""
    segments = await sync_to_async(lambda: list(Segment.objects.filter(request=request)))()
    assert len(segments) == 1 and segments[0].outcome == "completed"
    for tab in tabs:
        await tab.disconnect()


async def test_cancel_message_stops_the_request(owner: Any) -> None:
    request = await make_request(owner, "sim-long", {"sim.tokens_per_s": "50"})
    communicator = await connect(owner, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    while watcher.view is None or not watcher.text():
        await watcher.receive()
    await communicator.send_to(text_data='{"type":"cancel"}')
    terminal = await watcher.until_terminal()
    assert terminal["status"] == "cancelled"
    saved = await reload(request)
    assert saved.status == "cancelled" and saved.cancels == 1
    await communicator.disconnect()


async def test_checkpoints_are_coarse_not_per_delta(owner: Any) -> None:
    request = await make_request(owner, "sim-long", {"sim.tokens_per_s": "0"})
    communicator = await connect(owner, request.pk)
    await communicator.connect()
    await Watcher(communicator).until_terminal(60)
    saved = await reload(request)
    checkpoints = await sync_to_async(lambda: Checkpoint.objects.filter(request=request).count())()
    assert saved.events > 500
    assert 1 <= checkpoints < saved.events / 20
    await communicator.disconnect()

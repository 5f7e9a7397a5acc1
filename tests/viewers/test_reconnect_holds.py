"""A tab that reconnects says what it shows (`?reconnect=1&revision=N`): it is never sent a
snapshot older than that while the request runs (a web process without the runner knows the last
committed view, which may be older than patches another process sent the tab). Its patches go
on from the revision it holds, and it still ends on the committed final view."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from responses_app import selectors
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.streaming.wire import decode
from responses_app.viewers.cursor import CATCH_UP_S, CATCH_UPS, RESYNC_MIN_S
from tests.relay.helpers import connect, make_request, reload
from tests.relay.test_takeover import wait_for_status
from tests.viewers.test_protocol import queued, viewer

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def test_a_reconnecting_tab_is_never_sent_an_older_view(owner: Any) -> None:
    request = await make_request(owner, "sim-long", {"sim.tokens": "200", "sim.tokens_per_s": "40"},
                                 background=True)
    # Its runner is not in this process's hub, as in a worker: a socket here knows the committed
    # view only (and the patches it hears from now on).
    runner = StreamRunner(str(request.pk), get_hub())
    task = asyncio.get_running_loop().create_task(runner.run())
    async with asyncio.timeout(20):  # a tab elsewhere was sent patches not committed yet
        while (runner.delivery.patches.published < 20 or runner.delivery.patches.published <= 2 + (
                await sync_to_async(selectors.checkpoint_latest_revision)(request_id=request.pk) or 0)):
            await asyncio.sleep(0.01)
    holds = runner.delivery.patches.published
    moved = await connect(owner, request.pk, f"reconnect=1&revision={holds}")
    await moved.connect()
    messages: list[dict[str, Any]] = []
    async with asyncio.timeout(60):
        while not messages or messages[-1]["type"] != "terminal":
            messages.append(decode(await moved.receive_from(timeout=20)))
    await task
    saved = await wait_for_status(request, {"completed", "failed", "unknown", "error", "incomplete"}, timeout=10)
    await moved.disconnect()
    assert saved.status == "completed"
    shown = [m["revision"] for m in messages if m["type"] in ("patch", "snapshot")]
    assert shown and min(shown) >= holds, f"a view older than the tab's r{holds}: {shown[:3]}"
    final = await sync_to_async(selectors.view_latest)(request=await reload(request))
    assert messages[-1]["revision"] == final["revision"] == max(shown), "it ends on the committed view"


def test_a_first_snapshot_older_than_the_client_is_not_sent() -> None:
    cursor, _ = viewer(-1)
    cursor.holds = 12
    assert cursor.stale(9, ended=False)
    assert cursor.sent_revision == 12 and not cursor.resync_pending, "patches go on from what it holds"
    cursor.offer({"type": "patch", "base": 12, "revision": 13, "ops": []}, "13")
    assert queued(cursor) == ["13"]
    assert not cursor.stale(13, ended=False) and not cursor.stale(9, ended=True), "once ended, the last word"


def test_a_later_snapshot_older_than_the_client_is_asked_for_again() -> None:
    cursor, clock = viewer(20)
    cursor.resync_now()
    assert queued(cursor) == ["resync"]
    assert cursor.stale(18, ended=False)
    assert cursor.sent_revision == 20 and cursor.resync_pending and queued(cursor) == []
    clock.advance(1.0)
    assert queued(cursor) == ["resync"], "asked again, throttled"


def test_a_view_behind_the_client_is_asked_for_again_soon_then_at_the_usual_pace() -> None:
    """Its runner was asked to commit (Hub.ask_commit): the committed view catches up within a
    checkpoint's write, so the first few tries come every CATCH_UP_S, then every RESYNC_MIN_S."""
    cursor, clock = viewer(20)
    for _ in range(CATCH_UPS):
        cursor.resync_now()
        assert queued(cursor) == ["resync"]
        assert cursor.stale(18, ended=False)
        clock.advance(CATCH_UP_S - 0.01)
        assert queued(cursor) == []
        clock.advance(0.01)
        assert queued(cursor) == ["resync"], "soon"
    cursor.resync_now()
    queued(cursor)
    assert cursor.stale(18, ended=False)
    clock.advance(CATCH_UP_S)
    assert queued(cursor) == [], "past the catch-ups: the usual throttle"
    clock.advance(RESYNC_MIN_S - CATCH_UP_S)
    assert queued(cursor) == ["resync"]

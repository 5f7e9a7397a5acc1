"""A tab that reconnects says what it shows (`?reconnect=1&revision=N`): it is never sent a
snapshot older than that while the request runs (a web process without the runner knows the last
committed view, which may be older than patches another process sent the tab). Its patches go
on from the revision it holds, and it still ends on the committed final view."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async

from responses_app import selectors
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.streaming.wire import decode
from responses_app.viewers import follow
from responses_app.viewers import sender as sender_module
from responses_app.viewers.cursor import CATCH_UP_S, CATCH_UPS, RESYNC, RESYNC_MIN_S, Cursor
from responses_app.viewers.sender import Sender
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
    assert saved.status == "completed"
    shown = [m["revision"] for m in messages if m["type"] in ("patch", "snapshot")]
    assert shown and min(shown) >= holds, f"a view older than the tab's r{holds}: {shown[:3]}"
    final = await sync_to_async(selectors.view_latest)(request=await reload(request))
    assert messages[-1]["revision"] == final["revision"], "the terminal names the committed view"
    if max(shown) < final["revision"]:  # patches were cut (a slow machine): as a client must, it asks
        await moved.send_to(text_data='{"type":"snapshot"}')
        async with asyncio.timeout(20):
            while messages[-1]["type"] != "snapshot":
                messages.append(decode(await moved.receive_from(timeout=20)))
        shown.append(messages[-1]["revision"])
    await moved.disconnect()
    assert max(shown) == final["revision"], "it ends on the committed view"


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


def test_a_snapshot_no_newer_than_the_client_is_not_sent_while_the_view_here_is_behind() -> None:
    """A web process that does not run the request sends its committed view; the patches it heard
    since start past it (`follow.behind`): the same revision again would not move the client on."""
    cursor, clock = viewer(-1)
    cursor.holds = 12
    assert not cursor.stale(12, ended=False), "nothing newer heard: the view is current, it goes"
    cursor, clock = viewer(-1)
    cursor.holds = 12
    assert cursor.stale(12, ended=False, behind=True)
    assert cursor.sent_revision == 12 and cursor.resync_pending, "asked for again"
    clock.advance(CATCH_UP_S)
    assert queued(cursor) == ["resync"], "soon: its runner was asked to commit"


class Sent(list[dict[str, Any]]):
    async def __call__(self, message: dict[str, Any]) -> None:
        self.append(decode(message["text"]))


async def test_a_tab_moved_to_a_process_behind_the_runner_gets_the_newer_view_soon(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The tab holds r20, the last checkpoint. The process it moved to heard r25 from the runner
    elsewhere: r20 again is not sent; the runner is asked to commit and the view is read again
    after CATCH_UP_S, not after RESYNC_MIN_S."""
    hub = get_hub()
    asked: list[str] = []
    monkeypatch.setattr(hub, "ask_commit", asked.append)
    committed = iter([({"revision": 20}, "streaming"), ({"revision": 26}, "streaming")])

    async def current_view(request_id: str, *, own_copy: bool = True) -> tuple[dict[str, Any], str]:
        return next(committed)

    monkeypatch.setattr(sender_module, "current_view", current_view)
    hub.remember("r1", {"type": "patch", "base": 24, "revision": 25, "ops": []})
    loop = asyncio.get_running_loop()
    cursor, sent = Cursor(clock=loop.time, later=loop.call_later, holds=20), Sent()
    sender = Sender("r1", cursor, sent, close=None)  # type: ignore[arg-type]
    await sender.snapshot()
    assert sent == [] and asked == ["r1"] and cursor.sent_revision == 20
    started = loop.time()
    assert await asyncio.wait_for(cursor.take(), RESYNC_MIN_S) == RESYNC
    assert CATCH_UP_S - 0.05 <= loop.time() - started < RESYNC_MIN_S
    await sender.snapshot()
    assert [m["revision"] for m in sent] == [26] and asked == ["r1"], "caught up: nothing asked"


async def test_a_view_its_runner_sent_here_is_what_viewers_catch_up_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked (Hub.ask_commit), the runner's process sends its live view: newer than the committed
    one, it is the base the patches heard since chain onto, and a viewer waiting to catch up takes
    it at once. Once the request ended, the committed view is the last word."""
    hub = get_hub()
    committed = {"status": "streaming"}
    monkeypatch.setattr(follow, "_committed", lambda request_id: ({"revision": 20, "blocks": []}, committed["status"]))
    loop = asyncio.get_running_loop()
    cursor = Cursor(clock=loop.time, later=loop.call_later, holds=20)
    moved = Cursor(clock=loop.time, later=loop.call_later, holds=22)  # its first snapshot was older: skipped
    ahead = Cursor(clock=loop.time, later=loop.call_later)
    for each in (cursor, moved, ahead):
        await hub.attach("r1", each)
    try:
        cursor.snapshot_sent(20)
        cursor.offer({"type": "patch", "base": 29, "revision": 30, "ops": []}, "30")  # a gap: catch up soon
        assert cursor.resync_pending and cursor.outbox.empty()
        assert moved.stale(20, ended=False) and not moved.resync_pending
        ahead.snapshot_sent(31)
        hub.remember("r1", {"type": "patch", "base": 30, "revision": 31, "ops": []})
        hub._view_arrived("r1", orjson.dumps({"revision": 30, "status": "streaming",
                                              "view": {"revision": 30, "blocks": []}}).decode())
        assert cursor.outbox.get_nowait() == RESYNC, "at once"
        assert moved.outbox.get_nowait() == RESYNC, "at once, though it waited for nothing"
        assert ahead.outbox.empty(), "it holds more"
        view, status = await follow.current_view("r1")
        assert (view["revision"], status) == (31, "streaming"), "the view sent, and the patch heard since"
        assert hub.sent_view("r1")[0]["revision"] == 30, "a copy was patched, not the view kept"  # type: ignore[index]
        hub._view_arrived("r1", orjson.dumps({"revision": 25, "status": "streaming",
                                              "view": {"revision": 25, "blocks": []}}).decode())
        assert hub.sent_view("r1")[0]["revision"] == 30, "an older one is not kept"  # type: ignore[index]
        hub._view_arrived("r1", "not json")
        committed["status"] = "completed"
        view, status = await follow.current_view("r1")
        assert (view["revision"], status) == (20, "completed")
    finally:
        for each in (cursor, moved, ahead):
            hub.detach("r1", each)
    assert hub.sent_view("r1") is None, "kept only while the request has viewers here"

"""A web process whose viewer holds a newer view than the committed one asks the process that runs
the request to commit now (Fanout.ask_commit): through the request's ask group, at most once per
ASK_EVERY_S; the runner's process hands the request to its runner and sends its live view back (bench chaos: the
pause of a tab moved by a rolling restart of the web processes went from 2.4 s to 0.7 s at p99)."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import InMemoryChannelLayer

from responses_app.relay.fanout import ASK_EVERY_S, REMOTE_FLUSH_S, Fanout


async def until(condition: object, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)


async def test_a_process_asks_the_runners_process_to_commit() -> None:
    """Through the request's ask group, which only the process running it joins: no batch need be
    heard first."""
    layer = InMemoryChannelLayer()
    asked: list[str] = []
    runs = Fanout(layer, lambda *_: None, asked.append)  # a worker: it runs the request
    elsewhere = Fanout(layer, lambda *_: None, asked.append)  # a worker that runs another
    views = Fanout(layer, lambda *_: None)  # a web process
    try:
        await runs.serve_asks("r1")
        await elsewhere.serve_asks("r2")
        assert not await views.ask_commit("r1"), "no viewer of it here: nothing to ask for"
        await views.join("r1")
        assert await views.ask_commit("r1")
        await until(lambda: asked)
        assert asked == ["r1"], "asked once, only where it runs"
        assert not await views.ask_commit("r1"), f"once per {ASK_EVERY_S} s"
        await asyncio.sleep(ASK_EVERY_S)
        assert await views.ask_commit("r1")
        await until(lambda: len(asked) == 2)
        await runs.stop_asks("r1")  # its runner ended
        await asyncio.sleep(ASK_EVERY_S)
        assert await views.ask_commit("r1")
        await asyncio.sleep(0.1)
        assert asked == ["r1", "r1"], "nobody runs it any more"
    finally:
        await stop(runs, elsewhere, views)


async def test_the_runners_process_sends_its_live_view_to_the_process_that_asked() -> None:
    """Its viewers catch up from it at once, not from a commit read after CATCH_UP_S."""
    layer = InMemoryChannelLayer()
    sent: list[tuple[str, str]] = []

    async def live_view(request_id: str) -> str | None:
        return '{"revision":7}' if request_id == "r1" else None

    runs = Fanout(layer, lambda *_: None, lambda _: None, live_view)
    views = Fanout(layer, lambda *_: None, view_arrived=lambda *args: sent.append(args))
    try:
        for request_id in ("r1", "r2"):
            await runs.serve_asks(request_id)
            await views.join(request_id)
        assert await views.ask_commit("r1") and await views.ask_commit("r2")
        await until(lambda: sent)
        await asyncio.sleep(0.1)
        assert sent == [("r1", '{"revision":7}')], "r2 does not run there: nothing sent"
    finally:
        await stop(runs, views)


async def stop(*fanouts: Fanout) -> None:
    for fanout in fanouts:
        for task in (fanout._reader, fanout._keeper, fanout._sender):
            if task is not None:
                task.cancel()


async def test_drain_waits_for_what_is_queued_not_for_what_comes_after() -> None:
    """A stopping worker announces each stream once its last patches were sent: a runner still
    busy ending (a tool round) that goes on publishing does not hold every other hand-off."""
    layer = InMemoryChannelLayer()
    runs = Fanout(layer, lambda *_: None, lambda _: None)
    busy = asyncio.Event()

    async def publishing() -> None:
        while not busy.is_set():
            runs.publish("r2", '{"type":"patch"}')
            await asyncio.sleep(REMOTE_FLUSH_S / 2)

    other = asyncio.create_task(publishing())
    try:
        runs.publish("r1", '{"type":"patch"}')
        await asyncio.wait_for(runs.drain(), 10 * REMOTE_FLUSH_S)
        assert runs.counters["sent"] >= 1, "what was queued went"
    finally:
        busy.set()
        await other
        await stop(runs)


async def test_no_batch_is_sent_while_paused() -> None:
    """hand_off closes the layer's connections so: a batch sent on one as it closed was lost."""
    layer = InMemoryChannelLayer()
    runs = Fanout(layer, lambda *_: None, lambda _: None)
    try:
        async with runs.paused():
            runs.publish("r1", '{"type":"patch"}')
            await asyncio.sleep(3 * REMOTE_FLUSH_S)
            assert runs.counters["sent"] == 0
        await until(lambda: runs.counters["sent"] == 1)
    finally:
        await stop(runs)


@pytest.mark.timeout(20)
async def test_drain_after_a_sender_that_ended_waits_for_the_next_round() -> None:
    """Once its sender went idle, the next drain still yields to the next sender (a wake-up left
    set made it spin on the event loop, and a stopping worker never exited)."""
    layer = InMemoryChannelLayer()
    runs = Fanout(layer, lambda *_: None, lambda _: None)
    try:
        runs.publish("r1", '{"type":"patch"}')
        await until(lambda: runs._sender is not None and runs._sender.done())
        runs.publish("r1", '{"type":"patch"}')
        await asyncio.wait_for(runs.drain(), 10 * REMOTE_FLUSH_S)
        assert runs.counters["sent"] == 2
    finally:
        await stop(runs)

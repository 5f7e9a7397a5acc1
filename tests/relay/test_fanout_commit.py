"""A web process whose viewer holds a newer view than the committed one asks the process that runs
the request to commit now (Fanout.ask_commit): through the request's ask group, at most once per
ASK_EVERY_S; the runner's process hands the request to its runner and sends its live view back (bench chaos: the
pause of a tab moved by a rolling restart of the web processes went from 2.4 s to 0.7 s at p99)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer
from prometheus_client import REGISTRY

from responses_app.relay.fanout import ASK_EVERY_S, REMOTE_FLUSH_S, Fanout
from tests.conftest import IN_CI


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


@pytest.fixture
async def layers() -> AsyncIterator[list[Any]]:
    """Three channels_redis layers on the shared Redis, one process's each, under a prefix of
    their own (what they leave is flushed)."""
    import redis
    from channels_redis.core import RedisChannelLayer  # type: ignore[import-untyped]

    try:
        redis.Redis(host="127.0.0.1", port=6379, socket_timeout=1).ping()
    except redis.RedisError:
        if IN_CI:
            pytest.fail("CI must have Redis on 6379")
        pytest.skip("no Redis on 6379")  # the services lane, which CI runs, has it
    prefix = f"fanout-test-{uuid.uuid4().hex[:8]}"
    made = [RedisChannelLayer(hosts=["redis://127.0.0.1:6379/0"], prefix=prefix) for _ in range(3)]
    yield made
    for layer in made:
        await layer.flush()
        await layer.close_pools()


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


@pytest.mark.services
async def test_on_redis_each_process_gets_one_message_a_round_with_what_it_follows(layers: list[Any]) -> None:
    """Not a message per request per round (a third of a web process's CPU at 100 streams): the
    members of every group read at once, then one message per process that follows any."""
    heard: dict[str, list[tuple[str, list[str]]]] = {"a": [], "b": []}
    runs = Fanout(layers[0], lambda *_: None, lambda _: None)  # a worker, which has a viewer of r1 too
    a = Fanout(layers[1], lambda r, texts, _: heard["a"].append((r, texts)))
    b = Fanout(layers[2], lambda r, texts, _: heard["b"].append((r, texts)))
    try:
        for fanout, requests in ((a, ("r1", "r2")), (b, ("r2",)), (runs, ("r1",))):
            for request_id in requests:
                await fanout.join(request_id)
        for request_id in ("r1", "r2", "r3"):
            runs.publish(request_id, f"{request_id}-0")
            runs.publish(request_id, f"{request_id}-1")
        await until(lambda: heard["a"] and heard["b"])
        await asyncio.sleep(3 * REMOTE_FLUSH_S)
        assert sorted(heard["a"]) == [("r1", ["r1-0", "r1-1"]), ("r2", ["r2-0", "r2-1"])]
        assert heard["b"] == [("r2", ["r2-0", "r2-1"])]
        assert (runs.counters["sent"], a.counters["received"], b.counters["received"]) == (4, 2, 2), \
            "one message to each other process, then an empty one (a lost last message is noticed); " \
            "none to itself, none for r3 that nobody follows"
        assert runs.counters["received"] == 0
    finally:
        await stop(runs, a, b)


@pytest.mark.services
async def test_a_lost_message_is_noticed_at_once_and_its_requests_resync(layers: list[Any]) -> None:
    """A message lost between processes (seen in the chaos runs): a request whose last patches and
    terminal it held waited 20 s of silence. Each message is numbered and followed by another
    (an empty one after the last): the next tells which requests the lost one held."""
    heard: list[str] = []
    missed: list[list[str]] = []
    runs = Fanout(layers[0], lambda *_: None, lambda _: None)
    views = Fanout(layers[1], lambda r, texts, _: heard.extend(texts), missed=missed.append)
    sent = layers[0].send
    dropped: list[dict[str, object]] = []

    async def loses_one(channel: str, message: dict[str, object]) -> None:
        if heard and not dropped:
            dropped.append(message)  # as if popped by a receive that was cancelled
            return
        await sent(channel, message)

    layers[0].send = loses_one  # type: ignore[method-assign]
    lost_before = lost_count()
    try:
        for request_id in ("r1", "r2", "r3"):
            await views.join(request_id)
        runs.publish("r1", "r1-patch")
        await until(lambda: heard)
        runs.publish("r2", "r2-terminal")  # the message that is lost
        await until(lambda: missed, timeout=1.0)
        assert missed == [["r2"]], "the one request the lost message held resyncs, the others go on"
        assert views.counters["lost"] == 1 and heard == ["r1-patch"]
        assert lost_count() == lost_before + 1, "and on /metrics"
        assert dropped and dropped[0]["items"] == [["r2", ["r2-terminal"], None]]
        await asyncio.sleep(3 * REMOTE_FLUSH_S)
        assert runs.counters["sent"] == 3, "r1's, r2's (lost), and one empty message after the last"
        assert runs._sender is not None and runs._sender.done(), "then nothing more until the next patch"
    finally:
        await stop(runs, views)


async def test_a_batch_of_the_release_before_is_still_delivered() -> None:
    """A rolling deploy runs both releases side by side for a while."""
    layer = InMemoryChannelLayer()
    heard: list[tuple[str, list[str]]] = []
    views = Fanout(layer, lambda r, texts, _: heard.append((r, texts)))
    try:
        await views.join("r1")
        await layer.group_send("relay.r1", {"type": "relay.batch", "request_id": "r1", "origin": "elsewhere",
                                            "texts": ["p"], "arrived": None})
        await until(lambda: heard)
        assert heard == [("r1", ["p"])]
    finally:
        await stop(views)


def lost_count() -> float:
    return REGISTRY.get_sample_value("relay_fanout_lost_messages_total") or 0.0

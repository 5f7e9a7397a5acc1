"""A slow viewer never slows the runner: its bounded outbox turns a backlog into one snapshot."""

from __future__ import annotations

import asyncio

from responses_app.consumers import OUTBOX_SIZE, RESYNC, RequestConsumer


def viewer() -> RequestConsumer:
    consumer = RequestConsumer()
    consumer.sent_revision = 0
    consumer.overflows = 0
    consumer.outbox = asyncio.Queue(maxsize=OUTBOX_SIZE)
    return consumer


def patch(revision: int) -> tuple[dict[str, object], str]:
    message = {"type": "patch", "base": revision - 1, "revision": revision, "ops": []}
    return message, f'{{"revision":{revision}}}'


def test_overflow_drops_the_backlog_for_a_resync_and_keeps_the_terminal() -> None:
    consumer = viewer()
    for revision in range(1, OUTBOX_SIZE + 11):
        consumer.offer(*patch(revision))
        assert consumer.outbox.qsize() <= OUTBOX_SIZE
    consumer.offer({"type": "terminal", "revision": 999}, '{"type":"terminal"}')
    queued = [consumer.outbox.get_nowait() for _ in range(consumer.outbox.qsize())]
    assert consumer.overflows >= 1
    assert RESYNC in queued
    assert queued[-1] == '{"type":"terminal"}'
    assert len(queued) < OUTBOX_SIZE


def test_stale_patches_are_not_queued() -> None:
    consumer = viewer()
    consumer.sent_revision = 10
    consumer.offer(*patch(9))
    consumer.offer(*patch(10))
    assert consumer.outbox.empty()
    consumer.offer(*patch(11))
    assert consumer.outbox.qsize() == 1 and consumer.sent_revision == 11


async def test_a_patch_that_does_not_continue_the_clients_revision_is_held_for_one_snapshot() -> None:
    consumer = viewer()
    consumer.sent_revision = 10
    consumer.offer(*patch(13))  # 11 and 12 were lost on the way
    consumer.offer(*patch(14))
    consumer.offer(*patch(15))
    assert consumer.outbox.empty(), "the client is not sent what it cannot apply"
    async with asyncio.timeout(5):
        assert await consumer.outbox.get() == RESYNC
    assert consumer.outbox.empty(), "one snapshot, not one per patch"


def test_at_most_one_snapshot_waits_however_often_it_is_asked_for() -> None:
    consumer = viewer()
    for _ in range(3000):
        consumer._enqueue_resync()
    assert consumer.outbox.qsize() == 1


async def test_a_heartbeat_ahead_of_the_client_means_it_is_behind() -> None:
    consumer = viewer()
    consumer.sent_revision = 10
    consumer.offer({"type": "ping", "revision": 10, "status": "streaming"}, '{"type":"ping"}')
    assert consumer.outbox.get_nowait() == '{"type":"ping"}', "level: passed on"
    consumer.offer({"type": "ping", "revision": 12, "status": "streaming"}, '{"type":"ping"}')
    async with asyncio.timeout(5):
        assert await consumer.outbox.get() == RESYNC


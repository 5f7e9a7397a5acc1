"""A slow viewer never slows the runner: its bounded outbox turns a backlog into one snapshot."""

from __future__ import annotations

import asyncio
from collections import deque

from responses_app.consumers import OUTBOX_SIZE, RESYNC, RequestConsumer


def viewer() -> RequestConsumer:
    consumer = RequestConsumer()
    consumer.sent_revision = 0
    consumer.overflows = 0
    consumer.outbox = asyncio.Queue(maxsize=OUTBOX_SIZE)
    consumer.recent = deque(maxlen=8)
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

"""A viewer's frames: sent in offer while the writer waits, in order whatever the socket does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from responses_app.consumers import CLOSE_WRITER_FAILED, OUTBOX_SIZE, RequestConsumer
from responses_app.outbox import Outbox, send_now


class Socket:
    """An ASGI send whose writes can be paused, as a server's are under backpressure."""

    def __init__(self) -> None:
        self.frames: list[str] = []
        self.writable = asyncio.Event()
        self.writable.set()
        self.error: Exception | None = None

    async def send(self, message: dict[str, Any]) -> None:
        await self.writable.wait()
        if self.error is not None:
            raise self.error
        self.frames.append(message["text"])


def patch(revision: int) -> tuple[dict[str, object], str]:
    message = {"type": "patch", "base": revision - 1, "revision": revision, "ops": []}
    return message, f"[{revision},1]"


@pytest.fixture
async def viewer() -> AsyncIterator[tuple[RequestConsumer, Socket]]:
    socket = Socket()
    consumer = RequestConsumer()
    consumer.request_id = "r"
    consumer.sent_revision = 0
    consumer.outbox = Outbox(OUTBOX_SIZE)
    consumer._frame_send = lambda: socket.send  # type: ignore[method-assign]
    closed: list[int | None] = []

    async def close(code: int | None = None, reason: str | None = None) -> None:
        closed.append(code)

    consumer.close = close  # type: ignore[method-assign]
    consumer.closed = closed  # type: ignore[attr-defined]
    writer = asyncio.get_running_loop().create_task(consumer._write())
    async with asyncio.timeout(5):
        while not consumer.outbox.parked:
            await asyncio.sleep(0)
    yield consumer, socket
    writer.cancel()  # (it ended on its own where the socket failed)
    await asyncio.gather(writer, return_exceptions=True)


async def settled(consumer: RequestConsumer) -> None:
    async with asyncio.timeout(5):
        while not consumer.outbox.parked:
            await asyncio.sleep(0)


async def test_a_frame_goes_to_the_socket_in_offer_while_the_writer_waits(
        viewer: tuple[RequestConsumer, Socket]) -> None:
    consumer, socket = viewer
    consumer.offer(*patch(1))
    assert socket.frames == ["[1,1]"], "sent before the caller awaits anything: no task woken for it"
    assert consumer.outbox.parked and consumer.sent_revision == 1
    consumer.offer(*patch(2))
    assert socket.frames == ["[1,1]", "[2,1]"]


async def test_a_send_that_waits_is_finished_by_the_writer_before_anything_after_it(
        viewer: tuple[RequestConsumer, Socket]) -> None:
    consumer, socket = viewer
    socket.writable.clear()  # the socket's writes are paused
    consumer.offer(*patch(1))
    assert socket.frames == [] and not consumer.outbox.parked
    consumer.offer(*patch(2))
    consumer.offer(*patch(3))
    assert len(consumer.outbox) >= 2, "queued behind the paused send"
    await asyncio.sleep(0.01)
    assert socket.frames == []
    socket.writable.set()
    await settled(consumer)
    assert socket.frames == ["[1,1]", "[2,1]", "[3,1]"]
    consumer.offer(*patch(4))
    assert socket.frames[-1] == "[4,1]", "in offer again once the writer waits"


async def test_a_send_that_fails_in_offer_closes_the_socket_as_the_writer_would(
        viewer: tuple[RequestConsumer, Socket]) -> None:
    consumer, socket = viewer
    socket.error = RuntimeError("the client went away")
    consumer.offer(*patch(1))  # never raises to the runner that published
    async with asyncio.timeout(5):
        while not consumer.closed:  # type: ignore[attr-defined]
            await asyncio.sleep(0)
    assert consumer.closed == [CLOSE_WRITER_FAILED]  # type: ignore[attr-defined]


async def test_a_paused_send_that_fails_when_resumed_closes_the_socket(
        viewer: tuple[RequestConsumer, Socket]) -> None:
    consumer, socket = viewer
    socket.writable.clear()
    consumer.offer(*patch(1))
    socket.error = RuntimeError("reset while paused")
    socket.writable.set()
    async with asyncio.timeout(5):
        while not consumer.closed:  # type: ignore[attr-defined]
            await asyncio.sleep(0)
    assert consumer.closed == [CLOSE_WRITER_FAILED] and socket.frames == []  # type: ignore[attr-defined]


async def test_the_outbox_is_bounded_and_first_in_first_out() -> None:
    outbox = Outbox(3)
    for item in "abc":
        outbox.put_nowait(item)
    with pytest.raises(asyncio.QueueFull):
        outbox.put_nowait("d")
    assert [outbox.get_nowait(), await outbox.get()] == ["a", "b"] and len(outbox) == 1
    outbox.clear()
    assert outbox.empty() and not outbox.parked
    with pytest.raises(asyncio.QueueEmpty):
        outbox.get_nowait()
    getter = asyncio.get_running_loop().create_task(outbox.get())
    await asyncio.sleep(0)
    assert outbox.parked, "the reader waits with nothing queued"
    outbox.put_nowait("e")
    assert not outbox.parked
    assert await getter == "e"
    cancelled = asyncio.get_running_loop().create_task(outbox.get())
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert not outbox.parked, "a cancelled reader does not wait any more"


async def test_send_now_runs_a_send_as_far_as_it_goes() -> None:
    socket = Socket()
    assert send_now(socket.send, {"text": "a"}) is None and socket.frames == ["a"]
    socket.writable.clear()
    suspended = send_now(socket.send, {"text": "b"})
    assert suspended is not None and socket.frames == ["a"]
    waiter = asyncio.get_running_loop().create_task(asyncio.wait_for(suspended, 5))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    socket.writable.set()
    await waiter
    assert socket.frames == ["a", "b"]
    socket.error = ValueError("refused")
    with pytest.raises(ValueError):
        send_now(socket.send, {"text": "c"})

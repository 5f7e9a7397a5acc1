"""A closed viewer socket is freed as it closes, not left to the cycle collector.

The consumer held its sender, which held the consumer's `shut`; the sender's and the session
watchdog's cancelled tasks kept their CancelledError, whose frames held them again. Each closed
socket so left its whole graph (consumer, sender, cursor, the session, the user, the request row,
uvicorn's protocol and transport: about 480 objects) for a full collection: at 100 streams one web
process held 134,497 such objects, and the collection that freed them took 794 ms with the event
loop waiting (bench/README.md, chaos)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from responses_app.viewers.cursor import Cursor
from responses_app.viewers.request import RequestConsumer
from responses_app.viewers.sender import Sender
from tests.relay.helpers import Watcher, connect, make_request

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


@pytest.fixture
def cyclic_garbage() -> Iterator[Callable[[], list[Any]]]:
    """What has become garbage in reference cycles since the test began (automatic collections
    are off meanwhile, so none of it is freed before it is looked at)."""
    gc.collect()
    gc.disable()

    def collect() -> list[Any]:
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            return list(gc.garbage)
        finally:
            gc.garbage.clear()
            gc.set_debug(0)

    try:
        yield collect
    finally:
        gc.enable()


async def watch_to_the_end_and_close(owner: Any) -> None:
    request = await make_request(owner)
    watcher = Watcher(await connect(owner, request.pk))
    connected, _ = await watcher.communicator.connect()
    assert connected
    await watcher.until_terminal()
    await watcher.communicator.disconnect()
    for _ in range(5):  # the cancelled tasks end
        await asyncio.sleep(0)


async def test_a_closed_socket_leaves_no_cycle(owner: Any, cyclic_garbage: Callable[[], list[Any]]) -> None:
    await watch_to_the_end_and_close(owner)
    left = [type(o).__name__ for o in cyclic_garbage() if isinstance(o, RequestConsumer | Sender | Cursor)]
    assert left == [], "a closed socket's consumer, sender or cursor was left to the cycle collector"

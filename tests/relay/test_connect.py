"""A viewer's connect never waits for the process's one thread-sensitive thread.

In a burst of websocket connects every consumer's database calls, Channels' session and user
lookup, and the hop Channels' dispatch spends before every handler queued on asgiref's single
thread-sensitive thread: each connect waited its turn there. On PostgreSQL they run on the
websocket pool (dbthreads.ws_call): with that thread held, a viewer is authenticated, accepted,
sent its first view and its stream, and a conversation tab its turns, at once. On SQLite every
database call stays on that one thread, by design: nothing to check there."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient

from responses_app.models import ResponseRequest
from responses_app.relay import dbthreads, worker
from responses_app.relay.hub import get_hub
from responses_app.streaming.wire import PROTOCOL
from tests.relay.helpers import Watcher, make_request, reload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]
AT_ONCE = 20  # seconds: immediate on an idle machine; slack for a loaded one, far under the hold


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if dbthreads._sqlite():
        pytest.skip("on SQLite every database call stays on the one shared thread (by design)")


async def session_of(user: Any) -> str:
    login = AsyncClient()
    await sync_to_async(login.force_login)(user)
    return str(login.cookies["sessionid"].value)


def socket(path: str, session: str) -> WebsocketCommunicator:
    """A socket through the whole websocket stack of project.asgi: origin check, session, auth."""
    from project.asgi import application

    return WebsocketCommunicator(application, path, headers=[
        (b"host", b"testserver"), (b"origin", b"http://testserver"), (b"cookie", f"sessionid={session}".encode())])


@contextlib.asynccontextmanager
async def sync_thread_held() -> AsyncIterator[None]:
    """asgiref's thread-sensitive thread held, as a burst of other consumers' calls holds it."""
    entered, release = threading.Event(), threading.Event()

    def busy() -> None:
        entered.set()
        release.wait(120)  # far longer than any bound below: without the change, everything waits for this

    holder = asyncio.get_running_loop().create_task(database_sync_to_async(busy)())
    async with asyncio.timeout(10):
        while not entered.is_set():
            await asyncio.sleep(0.01)
    try:
        yield
    finally:
        release.set()
        await holder


async def test_a_viewer_gets_its_first_view_and_its_stream_while_the_sync_thread_is_busy(
        owner: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(worker, "SWEEP_S", 3600.0)  # only the consumer's start message starts it
    session = await session_of(owner)
    request = await make_request(owner)
    hub = get_hub()
    communicator = socket(f"/ws/requests/{request.pk}/?v={PROTOCOL}", session)
    try:
        async with sync_thread_held():
            connected, _ = await communicator.connect(timeout=AT_ONCE)
            assert connected, "the handshake waited for the busy thread"
            watcher = Watcher(communicator)
            try:
                first = await watcher.receive(timeout=AT_ONCE)
            except TimeoutError:
                pytest.fail("the first view waited for the busy thread")
            assert first["type"] == "snapshot" and first["protocol"] == PROTOCOL
            await watcher.until_terminal(30)  # the stream, the whole way, with the thread still held
            assert watcher.terminal is not None and watcher.terminal["status"] == "completed"
            await communicator.send_to(text_data='{"type":"ping"}')  # a frame is dispatched too
            assert (await watcher.receive(timeout=AT_ONCE))["type"] == "pong"
        saved = await reload(request)
        assert saved.status == ResponseRequest.Status.COMPLETED
        assert saved.viewer_connections == 1  # the consumer's count was written, once
    finally:
        await communicator.disconnect()
        if hub.worker_task is not None:
            hub.worker_task.cancel()
            await asyncio.gather(hub.worker_task, return_exceptions=True)


async def test_refusals_and_a_conversation_tab_do_not_wait_for_the_busy_sync_thread(
        owner: Any, outsider: Any, no_upstream: list[str]) -> None:
    request = await make_request(owner)
    sessions = {"owner": await session_of(owner), "outsider": await session_of(outsider)}
    async with sync_thread_held():
        # Not the owner's: accepted, then closed 4403, at once.
        refused = socket(f"/ws/requests/{request.pk}/?v={PROTOCOL}", sessions["outsider"])
        assert (await refused.connect(timeout=AT_ONCE))[0]
        assert (await refused.receive_output(timeout=AT_ONCE)) == {"type": "websocket.close", "code": 4403}
        # No session at all: an anonymous user, 4403 too.
        anonymous = socket(f"/ws/requests/{request.pk}/?v={PROTOCOL}", "nosuchsession")
        assert (await anonymous.connect(timeout=AT_ONCE))[0]
        assert (await anonymous.receive_output(timeout=AT_ONCE)) == {"type": "websocket.close", "code": 4403}
        # The conversation tab gets its turns.
        tab = socket(f"/ws/conversations/{request.conversation_id}/", sessions["owner"])
        assert (await tab.connect(timeout=AT_ONCE))[0]
        assert await tab.receive_json_from(timeout=AT_ONCE) == {"type": "turns", "ids": [str(request.pk)]}
        await tab.disconnect()

"""A created request starts at once: its start never waits for the takeover sweep.

Under a burst of websocket connects the process's one thread-sensitive thread (where every
websocket consumer's database calls run) has a queue; the runner consumer must not wait in it."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.test import AsyncClient

from project.handler import get_asgi_application
from responses_app import selectors
from responses_app.models import ResponseRequest
from responses_app.relay import dbthreads, worker
from responses_app.relay.hub import get_hub
from tests.relay.helpers import FAST, Watcher, connect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def test_a_created_request_starts_at_once_while_the_sync_thread_is_busy(owner: Any,
                                                                             monkeypatch: Any) -> None:
    monkeypatch.setattr(worker, "SWEEP_S", 3600.0)  # only the start message can start it
    login = AsyncClient()
    await sync_to_async(login.force_login)(owner)
    session = login.cookies["sessionid"].value
    entered, release = threading.Event(), threading.Event()

    def busy() -> None:  # a websocket consumer's database call, holding the thread
        entered.set()
        release.wait(90)  # far longer than the bounds below: without the fix, the start waits for this

    hub = get_hub()
    holder = asyncio.get_running_loop().create_task(database_sync_to_async(busy)())
    try:
        async with asyncio.timeout(10):
            while not entered.is_set():
                await asyncio.sleep(0.01)
        # The real HTTP stack (the project's ASGI handler: each request on a thread of its own; the
        # API view, async, on this loop: the runner it starts is in this loop's hub).
        token = "t" * 32
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=get_asgi_application()),
                                     base_url="http://testserver",
                                     cookies={"sessionid": session, "csrftoken": token},
                                     headers={"X-CSRFToken": token}) as http:
            created = await http.post("/api/requests", content=json.dumps({
                "input": "Hello there", "model": "sim-text", "metadata": FAST}),
                headers={"content-type": "application/json"})
        assert created.status_code == 201, created.text
        request_id = created.json()["id"]
        try:
            async with asyncio.timeout(30):  # 'at once' on an idle machine; a loaded one gets slack
                while hub.runner(request_id) is None:
                    await asyncio.sleep(0.01)
        except TimeoutError:
            pytest.fail("the start message waited for the busy thread: no runner spawned")
        if not dbthreads._sqlite():  # on PostgreSQL runners have threads of their own: the lease is taken too
            async with asyncio.timeout(30):  # 'at once' on an idle machine; a loaded one gets slack
                while await dbthreads.db(selectors.request_status)(request_id=request_id) == "pending":
                    await asyncio.sleep(0.01)
    finally:
        release.set()
        await holder
    try:
        communicator = await connect(owner, request_id)
        await communicator.connect()
        watcher = Watcher(communicator)
        await watcher.until_terminal(30)
        await communicator.disconnect()
        saved = await sync_to_async(ResponseRequest.objects.get)(pk=request_id)
        assert saved.status == "completed"
        assert hub.counters["takeovers"] == 0, "the sweep started nothing"
    finally:
        if hub.worker_task is not None:
            hub.worker_task.cancel()
            await asyncio.gather(hub.worker_task, return_exceptions=True)

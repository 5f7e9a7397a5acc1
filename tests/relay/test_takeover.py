"""A runner that dies is replaced without anyone reloading a page: the sweep takes its request over
once the lease runs out, and the stream flows again from where the log ends."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from responses_app import services
from responses_app.models import ResponseRequest, Segment
from responses_app.relay import worker
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from tests.relay.helpers import Watcher, connect, make_request, reload
from tests.relay.test_runner_faults import SIM_AUTH

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def wait_for_status(request: ResponseRequest, statuses: set[str], timeout: float = 30) -> ResponseRequest:
    async with asyncio.timeout(timeout):
        while True:
            saved = await reload(request)
            if saved.status in statuses:
                return saved
            await asyncio.sleep(0.05)


async def test_a_dead_runner_is_taken_over_by_the_sweep(owner: Any, monkeypatch: Any, simulator_url: str,
                                                        caplog: Any) -> None:
    monkeypatch.setattr(services, "LEASE_SECONDS", 1)
    monkeypatch.setattr(worker, "SWEEP_S", 0.2)
    caplog.set_level(logging.WARNING, logger="responses_app.relay.worker")
    request = await make_request(owner, "sim-long", {"sim.tokens": "120", "sim.tokens_per_s": "40"},
                                 background=True)
    hub = get_hub()
    first = StreamRunner(str(request.pk), hub)
    task = asyncio.get_running_loop().create_task(first.run())
    # A viewer is connected throughout, on a socket that never reloads.
    communicator = await connect(owner, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    async with asyncio.timeout(20):
        while watcher.view is None or watcher.view["revision"] < 40:
            await watcher.receive()
    task.cancel()  # the process "dies": after live patches no checkpoint holds yet
    await asyncio.gather(task, return_exceptions=True)
    assert (await reload(request)).status == "streaming", "nobody said it ended"
    worker.ensure_worker()  # this process's runner worker: its sweep finds the expired lease
    try:
        async with asyncio.timeout(15):  # lease (1 s) + sweep (0.2 s), with slack for a loaded machine
            while (await reload(request)).runner_token in (None, first.token):
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail("not taken over within lease + sweep")
    saved = await wait_for_status(request, {"completed", "failed", "unknown", "error"}, timeout=60)
    await watcher.until_terminal(30)
    await communicator.disconnect()
    assert saved.status == "completed"
    kinds = await sync_to_async(lambda: list(Segment.objects.filter(request=saved).order_by("index")
                                             .values_list("kind", flat=True)))()
    assert kinds[0] == "initial" and "resume" in kinds[1:], "taken over by resuming, never re-POSTed"
    async with httpx.AsyncClient(headers=SIM_AUTH) as client:
        truth = (await client.get(f"{simulator_url}/responses/{saved.response_id}")).json()
    expected = truth["output"][0]["content"][0]["text"]
    assert saved.final_text == expected, "nothing lost, nothing doubled"
    assert watcher.text() == expected, "the viewer that never reloaded ends on the final text"
    assert saved.duplicates >= 0 and saved.gaps == 0
    assert any("expired" in r.getMessage() and str(request.pk) in r.getMessage() for r in caplog.records)
    assert hub.counters["takeovers"] >= 1 and hub.counters["lease_expiries"] >= 1

"""One lease keeper per process: it renews every runner's lease and hears of a Stop pressed elsewhere."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from responses_app.models import ResponseRequest
from responses_app.relay import keepers
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from tests.relay.helpers import make_request, reload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def test_leases_are_renewed_together_and_a_stop_from_elsewhere_is_heard(owner: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(keepers, "LEASE_POLL_S", 0.1)
    monkeypatch.setattr(keepers, "LEASE_RENEW_S", 0.2)
    slow = {"sim.tokens_per_s": "20", "sim.tokens": "400"}
    # Seeds of their own: the simulator derives response ids from the seed.
    requests = [await make_request(owner, "sim-long", dict(slow, **{"sim.seed": str(100 + i)}), background=False)
                for i in range(3)]
    hub = get_hub()
    runners = [StreamRunner(str(r.pk), hub) for r in requests]
    tasks = [asyncio.get_running_loop().create_task(r.run()) for r in runners]
    try:
        async with asyncio.timeout(15):
            while len(hub.leases.runners) < 3:
                await asyncio.sleep(0.02)
            first = {r.pk: r.lease_expires for r in [await reload(r) for r in requests]}
            while True:  # every lease moves forward, in shared rounds
                await asyncio.sleep(0.1)
                now = {r.pk: r.lease_expires for r in [await reload(r) for r in requests]}
                assert None not in now.values(), "a runner ended early"
                if all(now[pk] > first[pk] for pk in first):  # type: ignore[operator]
                    break
            # Stop pressed in another process: only the flag in the database tells this one.
            await sync_to_async(ResponseRequest.objects.filter(pk=requests[1].pk).update)(cancel_requested=True)
            await tasks[1]
        assert (await reload(requests[1])).status == "cancelled"
        assert not tasks[0].done() and not tasks[2].done()
    finally:
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*tasks)
    assert not hub.leases.runners


async def test_a_runner_whose_request_was_taken_over_stops_and_writes_nothing(owner: Any, monkeypatch: Any) -> None:
    # Its lease ran out (a database blip outlasting it) and a sweep gave the request to another runner.
    monkeypatch.setattr(keepers, "LEASE_POLL_S", 0.1)
    request = await make_request(owner, "sim-long", {"sim.tokens_per_s": "20", "sim.tokens": "400"},
                                 background=False)
    hub = get_hub()
    runner = StreamRunner(str(request.pk), hub)
    published: list[dict[str, Any]] = []
    monkeypatch.setattr(hub, "publish", lambda request_id, message, text: published.append(message))
    task = asyncio.get_running_loop().create_task(runner.run())
    async with asyncio.timeout(15):
        while not published:
            await asyncio.sleep(0.02)
    other = uuid.uuid4()
    await sync_to_async(ResponseRequest.objects.filter(pk=request.pk).update)(runner_token=other)
    await asyncio.wait_for(task, 10)
    saved = await reload(request)
    assert saved.status == "streaming" and saved.runner_token == other, "left to the runner that holds it"
    assert not any(m["type"] == "terminal" for m in published), "no ending published by the loser"

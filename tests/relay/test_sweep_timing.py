"""The sweep is timed to the earliest lease's end (worker.next_sweep_in): a runner that died is taken
over as its lease runs out, not up to a whole sweep later (bench chaos: a kill -9's pause was the
lease plus up to SWEEP_S, 14.1 s at p99 against a target of the lease plus 2 s)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from responses_app import services
from responses_app.models import ResponseRequest
from responses_app.relay import worker
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from tests.relay.helpers import make_request, reload
from tests.relay.test_takeover import wait_for_status

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def leased(owner: Any, expires_in_s: float) -> ResponseRequest:
    request = await make_request(owner, "sim-text")
    await sync_to_async(ResponseRequest.objects.filter(pk=request.pk).update)(
        status="streaming", lease_expires=timezone.now() + timedelta(seconds=expires_in_s))
    return request


async def test_the_next_sweep_comes_as_the_earliest_lease_runs_out(owner: Any) -> None:
    assert await worker.next_sweep_in() == worker.SWEEP_S, "no lease: the usual interval"
    await leased(owner, 30)
    assert await worker.next_sweep_in() == worker.SWEEP_S, "a lease far off: the usual interval"
    await leased(owner, 2.0)
    assert 0.5 < await worker.next_sweep_in() <= 2.0 + worker.SWEEP_AFTER_EXPIRY_S, "just after it runs out"
    await leased(owner, -5)  # expired: the sweep takes it, it does not make the next one due at once
    assert await worker.next_sweep_in() > 0.5


async def test_a_lease_that_ran_out_during_a_sweep_makes_the_next_one_due_at_once(owner: Any) -> None:
    """The sweep read it still running, and the next-sweep query came after it ran out: it used to
    find no lease left and wait a whole SWEEP_S."""
    sweep_started = timezone.now() - timedelta(seconds=1)
    await leased(owner, -0.5)
    assert await worker.next_sweep_in() == worker.SWEEP_S, "without the sweep's start: not seen"
    assert await worker.next_sweep_in(since=sweep_started) == worker.SWEEP_SOONEST_S


async def test_a_dead_runner_is_taken_over_as_its_lease_ends_not_a_sweep_later(owner: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(services, "LEASE_SECONDS", 2)
    monkeypatch.setattr(worker, "SWEEP_S", 30.0)  # only a sweep timed to the lease can take it over in time
    request = await make_request(owner, "sim-long", {"sim.tokens": "200", "sim.tokens_per_s": "40"},
                                 background=True)
    first = StreamRunner(str(request.pk), get_hub())
    task = asyncio.get_running_loop().create_task(first.run())
    async with asyncio.timeout(20):
        while not (await reload(request)).response_id:  # resumable from here
            await asyncio.sleep(0.05)
    task.cancel()  # the process dies
    await asyncio.gather(task, return_exceptions=True)
    expires = (await reload(request)).lease_expires
    worker.ensure_worker()
    async with asyncio.timeout(15):
        while (await reload(request)).runner_token in (None, first.token):
            await asyncio.sleep(0.02)
    taken_after = time.time() - expires.timestamp()
    # A sweep later would be 30 s; the bound leaves room for a CI lane's loaded cores (2.6 s seen
    # there, 0.1-0.3 s alone), where the sweep's query waits its turn on the database thread.
    assert taken_after < 5, f"taken over {taken_after:.2f} s after its lease ran out (a sweep is {worker.SWEEP_S} s)"
    saved = await wait_for_status(request, {"completed", "failed", "unknown", "error"}, timeout=60)
    assert saved.status == "completed"

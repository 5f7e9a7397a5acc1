"""A runner whose process is stopping hands its stream over: it stops reading, commits what it
applied (the checkpoint at the revision its viewers saw, the raw events up to its last sequence
number) and releases its lease at once. The runner that takes it resumes after that sequence
number: a viewer that never reloads sees every delta once, none lost, none repeated."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from responses_app import selectors
from responses_app.models import Segment
from responses_app.relay.hub import Hub, get_hub
from responses_app.relay.stream_runner import StreamRunner
from tests.relay.helpers import Watcher, connect, make_request, reload
from tests.relay.test_runner_faults import SIM_AUTH
from tests.relay.test_takeover import wait_for_status

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


def spawn(hub: Hub, runner: StreamRunner) -> asyncio.Task[Any]:
    """Run it as a runner process does: known to the hub, so its viewers here get its patches."""
    assert hub.spawn(runner.request_id, lambda: runner)
    return next(task for task in hub.tasks if task.get_name() == f"relay-runner-{runner.request_id}")


async def test_a_stream_handed_over_goes_on_from_its_last_applied_event(owner: Any, simulator_url: str) -> None:
    request = await make_request(owner, "sim-long", {"sim.tokens": "160", "sim.tokens_per_s": "40"},
                                 background=True)
    hub = get_hub()
    first = StreamRunner(str(request.pk), hub)
    task = spawn(hub, first)
    communicator = await connect(owner, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    async with asyncio.timeout(20):
        while watcher.view is None or watcher.view["revision"] < 40:
            await watcher.receive()
    assert first.hand_off()
    await asyncio.wait_for(task, 10)  # it returns: the hand-off is no crash
    handed = await reload(request)
    assert handed.status == "streaming" and handed.runner_token is None
    assert handed.lease_expires is not None and handed.lease_expires < timezone.now(), "claimable at once"
    committed = await sync_to_async(selectors.checkpoint_latest_revision)(request_id=request.pk)
    assert committed == first.delivery.patches.published, "what the viewers were sent is committed"
    applied = first.transcript.last_sequence_number

    second = StreamRunner(str(request.pk), hub)
    runner = spawn(hub, second)
    async with asyncio.timeout(60):  # read all along: a viewer that stops reading is resynced
        while watcher.terminal is None or watcher.view is None or watcher.view["revision"] < watcher.terminal[
                "revision"]:
            await watcher.receive()
    await runner
    saved = await wait_for_status(request, {"completed", "failed", "unknown", "error", "incomplete"}, timeout=10)
    await communicator.disconnect()
    assert saved.status == "completed"
    segments = await sync_to_async(lambda: list(Segment.objects.filter(request=saved).order_by("index")
                                                .values_list("kind", "starting_after")))()
    assert segments == [("initial", None), ("resume", applied)], "resumed after the last applied event"
    async with httpx.AsyncClient(headers=SIM_AUTH) as client:
        truth = (await client.get(f"{simulator_url}/responses/{saved.response_id}")).json()
    expected = truth["output"][0]["content"][0]["text"]
    assert saved.final_text == expected
    assert watcher.text() == expected and watcher.gaps == 0, "the viewer saw every delta once"
    after = [m for m in watcher.messages if m["type"] in ("patch", "snapshot") and m["revision"] > committed]
    assert after[0]["type"] == "patch" and after[0]["base"] == committed, \
        "its patches go on from the revision the viewer holds: no resync (and no wait for one)"
    assert saved.duplicates == 0 and saved.gaps == 0


async def test_a_stream_handed_over_before_the_upstream_confirmed_it_waits_for_its_id(owner: Any,
                                                                                     simulator_url: str) -> None:
    """Stopped between the POST and `response.created` (here the simulator's first byte comes 1.5 s
    late), a runner would leave a request the next one cannot know ran: that one ends it
    `unknown` rather than send it twice. So it lets go only once the id is stored, and the next
    runner resumes it to `completed`."""
    request = await make_request(owner, "sim-long", {"sim.tokens": "60", "sim.tokens_per_s": "60",
                                                     "sim.first_byte_delay_ms": "1500"}, background=True)
    hub = get_hub()
    first = StreamRunner(str(request.pk), hub)
    task = spawn(hub, first)
    async with asyncio.timeout(10):
        while first._reader is None:  # the POST is on its way
            await asyncio.sleep(0.01)
    assert first.hand_off(), "taken: it is let go as soon as it can be"
    await asyncio.sleep(0.5)
    assert not task.done(), "not before the upstream confirmed the request"
    await asyncio.wait_for(task, 10)
    handed = await reload(request)
    assert handed.response_id and handed.status == "streaming" and handed.runner_token is None

    second = StreamRunner(str(request.pk), hub)
    await asyncio.wait_for(spawn(hub, second), 30)
    saved = await wait_for_status(request, {"completed", "failed", "unknown", "error", "incomplete"}, timeout=10)
    assert saved.status == "completed", (saved.status, saved.error_code)
    kinds = await sync_to_async(lambda: list(Segment.objects.filter(request=saved).order_by("index")
                                             .values_list("kind", flat=True)))()
    assert kinds == ["initial", "resume"]

"""A tool request whose runner dies during the continuation (a kill -9, no hand-off): the runner
that takes it over rebuilds the view from the event log, by round. The answer it commits is the
upstream's, once: not the continuation's text on top of itself, nothing lost."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from responses_app import selectors, services
from responses_app.models import Checkpoint, ResponseRequest
from responses_app.relay import toolround
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from tests.relay.test_runner_faults import SIM_AUTH
from tests.relay.test_takeover import wait_for_status
from tests.relay.test_tools import calls_of, kinds_of, tool_request

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


@sync_to_async
def expire_lease(request: ResponseRequest) -> None:
    ResponseRequest.objects.filter(pk=request.pk).update(lease_expires=timezone.now() - timedelta(seconds=1))


async def truth(simulator_url: str, response_id: str) -> str:
    async with httpx.AsyncClient(headers=SIM_AUTH) as client:
        response = (await client.get(f"{simulator_url}/responses/{response_id}")).json()
    return "".join(part["text"] for item in response["output"] if item["type"] == "message"
                   for part in item["content"] if part["type"] == "output_text")


@pytest.mark.parametrize("events_before_kill", [0, 1, 3, 12])
async def test_a_runner_killed_in_the_continuation_is_taken_over_without_doubling(
        owner: Any, monkeypatch: Any, simulator_url: str, events_before_kill: int) -> None:
    request = await tool_request(owner, "sim-function", {"sim.tokens_per_s": "200", "sim.tokens": "60"})
    first = StreamRunner(str(request.pk), get_hub())
    task = asyncio.get_running_loop().create_task(first.run())
    real = services.request_set_response_id
    seen: list[str] = []

    def set_response_id(**kwargs: Any) -> Any:
        seen.append(kwargs["response_id"])
        return real(**kwargs)

    monkeypatch.setattr(services, "request_set_response_id", set_response_id)
    async with asyncio.timeout(30):  # the continuation's response is confirmed, then some events
        while len(seen) < 2 or first.transcript.round < 1:
            await asyncio.sleep(0)
        while first.delivery.log._count < events_before_kill and not first.transcript.terminal:
            await asyncio.sleep(0)
    task.cancel()  # the process dies: no hand-off, whatever was not committed is gone
    await asyncio.gather(task, return_exceptions=True)
    await expire_lease(request)
    second = StreamRunner(str(request.pk), get_hub())
    await asyncio.wait_for(second.run(), 60)
    saved = await wait_for_status(request, {"completed", "failed", "unknown", "error", "incomplete"}, timeout=10)
    assert saved.status == "completed", saved.error
    assert saved.final_text == await truth(simulator_url, saved.response_id), "the answer once, whole"
    assert len(await calls_of(saved)) == 1, "the tool ran once"
    assert saved.response_id == seen[1], "the continuation the upstream confirmed is the one answered"
    assert (await kinds_of(saved)).count("continuation") == 1, "never a second continuation"



async def provider_keeps_nothing(upstream: Any, response_id: str) -> dict[str, str]:
    return {}


@sync_to_async
def lose_the_committed_view(request: ResponseRequest) -> None:
    """As if no commit of the view had held: the takeover has the redacted log alone."""
    Checkpoint.objects.filter(request=request).delete()


@pytest.mark.parametrize("source", ["committed view", "upstream"])
async def test_a_runner_killed_before_its_tool_ran_gives_the_tool_its_real_arguments(
        owner: Any, monkeypatch: Any, simulator_url: str, source: str) -> None:
    request = await tool_request(owner, "sim-function", {"sim.tokens_per_s": "200", "sim.tokens": "60"})
    await _killed_at_the_tool_step(request, claim=False)
    assert not await calls_of(request)
    if source == "committed view":
        monkeypatch.setattr(toolround, "_arguments_upstream", provider_keeps_nothing)
    else:
        await lose_the_committed_view(request)
    await asyncio.wait_for(StreamRunner(str(request.pk), get_hub()).run(), 60)
    saved = await wait_for_status(request, {"completed", "failed", "unknown", "error", "incomplete"}, timeout=10)
    calls = await calls_of(saved)
    assert [call.arguments for call in calls] == [{"location": "Paris, France", "unit": "C"}], \
        "the tool got the arguments the model wrote, not the log's redacted ones"
    assert calls[0].status == "done" and "temperature" in calls[0].output
    assert saved.status == "completed", saved.error
    assert saved.final_text == await truth(simulator_url, saved.response_id)


async def _killed_at_the_tool_step(request: ResponseRequest, *, claim: bool) -> None:
    """Run the request's first runner until its response ended and committed, then kill it just
    before its tool ran (`claim`: just after it claimed the call, as if the tool was running)."""
    first = StreamRunner(str(request.pk), get_hub())
    entered = asyncio.Event()

    async def dies_at_the_tool(transcript: Any, upstream: Any) -> list[dict[str, Any]]:
        await first.delivery.checkpoints.drain()
        if claim:
            call = transcript.function_calls()[0]
            await sync_to_async(services.tool_call_claim)(request_id=request.pk, call_id=call["call_id"],
                                                           name=call["name"], arguments=call["arguments"])
        entered.set()
        await asyncio.Event().wait()
        return []

    first.tools.run = dies_at_the_tool  # type: ignore[method-assign]
    task = asyncio.get_running_loop().create_task(first.run())
    await asyncio.wait_for(entered.wait(), 30)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await expire_lease(request)


async def test_a_call_whose_arguments_cannot_be_had_again_is_not_run(owner: Any, monkeypatch: Any) -> None:
    request = await tool_request(owner, "sim-function", {"sim.tokens_per_s": "200", "sim.tokens": "60"})
    await _killed_at_the_tool_step(request, claim=False)
    monkeypatch.setattr(toolround, "_arguments_upstream", provider_keeps_nothing)
    await lose_the_committed_view(request)
    ran: list[str] = []
    monkeypatch.setattr(toolround, "run_tool", lambda name, arguments: ran.append(name) or "{}")
    await asyncio.wait_for(StreamRunner(str(request.pk), get_hub()).run(), 60)
    saved = await wait_for_status(request, {"completed", "failed", "unknown", "error", "incomplete"}, timeout=10)
    assert not ran, "never run with the log's redacted arguments"
    calls = await calls_of(saved)
    assert [call.status for call in calls] == ["failed"] and toolround.ARGUMENTS_LOST in calls[0].output
    assert saved.status == "completed", "the model is told, and answers"


async def test_a_call_its_dead_runner_was_running_is_not_run_twice(owner: Any, monkeypatch: Any) -> None:
    request = await tool_request(owner, "sim-function", {"sim.tokens_per_s": "200", "sim.tokens": "60"})
    await _killed_at_the_tool_step(request, claim=True)
    ran: list[str] = []
    monkeypatch.setattr(toolround, "run_tool", lambda name, arguments: ran.append(name) or "{}")
    await asyncio.wait_for(StreamRunner(str(request.pk), get_hub()).run(), 60)
    saved = await wait_for_status(request, {"completed", "failed", "unknown", "error", "incomplete"}, timeout=10)
    assert not ran and saved.status == "completed"
    view = await sync_to_async(selectors.view_latest)(request=saved)
    outputs = [block.get("output") for block in view["blocks"] if block.get("tool") == "function_call"]
    assert outputs and toolround.INTERRUPTED in outputs[0], "the model and the viewers are told why"

"""Function tools: arguments parsed when complete, each call id run once, then a continuation."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from responses_app import selectors, services
from responses_app.models import ResponseRequest, Segment, ToolCall
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.tools import ToolError, offered, parse_arguments, run_tool, tool_definitions
from tests.relay.helpers import Watcher, connect, reload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


@sync_to_async
def tool_request(user: Any, model: str, metadata: dict[str, str] | None = None) -> ResponseRequest:
    conversation = services.conversation_create(owner=user)
    request, _ = services.request_create(
        owner=user, input="What's the weather in Paris?", model=model, client_request_id=f"tools-{model}",
        conversation=conversation,
        params={"background": True, "tools": tool_definitions(),
                "metadata": {"sim.tokens_per_s": "0", "sim.seed": "5", **(metadata or {})}},
    )
    return request


@sync_to_async
def calls_of(request: ResponseRequest) -> list[ToolCall]:
    return list(ToolCall.objects.filter(request=request).order_by("started_at"))


@sync_to_async
def kinds_of(request: ResponseRequest) -> list[str]:
    return list(Segment.objects.filter(request=request).order_by("index").values_list("kind", flat=True))


@pytest.mark.parametrize(("model", "count"), [("sim-function", 1), ("sim-parallel-functions", 2)])
async def test_tool_runs_once_and_the_answer_uses_it(owner: Any, model: str, count: int) -> None:
    request = await tool_request(owner, model)
    communicator = await connect(owner, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    terminal = await watcher.until_terminal()
    await communicator.disconnect()
    saved = await reload(request)
    assert terminal["status"] == saved.status == "completed"
    calls = await calls_of(request)
    assert len(calls) == count and all(c.status == "done" for c in calls)
    assert await kinds_of(request) == ["initial", "continuation"]
    tool_blocks = [b for b in watcher.view["blocks"] if b.get("tool") == "function_call"]
    assert len(tool_blocks) == count and all(b["state"] == "done" for b in tool_blocks)
    for call in calls:
        assert call.output in saved.final_text or call.call_id in saved.final_text
    assert saved.usage and saved.usage["total_tokens"] > 0
    # Searchable by what the calls said: each call's name, arguments and output, a line each.
    lines = saved.tool_text.splitlines()
    assert sorted(line.split(" ", 1)[0] for line in lines) == sorted(c.name for c in calls)
    for call in calls:
        line = next(line for line in lines if line.startswith(call.name + " "))
        assert call.output in line and json.loads(line[len(call.name) + 1:-len(call.output) - 1]) == call.arguments
    log = await sync_to_async(lambda: selectors.event_log_text(request_id=request.pk))()
    events = [json.loads(line[len("data: "):]) for line in log.split("\n\n") if line.startswith("data: ")]
    argument_events = [e for e in events if e["type"].startswith("response.function_call_arguments.")]
    assert argument_events and all(e.get("delta", e.get("arguments")) == "[redacted]" for e in argument_events)
    items = [e["item"] for e in events if e["type"].startswith("response.output_item.")]
    assert all(i["arguments"] in ("", "[redacted]") for i in items if i["type"] == "function_call")


async def test_a_recovered_request_never_runs_a_tool_twice(owner: Any) -> None:
    request = await tool_request(owner, "sim-function", {"sim.tokens_per_s": "100"})
    hub = get_hub()
    first = StreamRunner(str(request.pk), hub)
    task = asyncio.get_running_loop().create_task(first.run())
    async with asyncio.timeout(20):
        while not await sync_to_async(ToolCall.objects.filter(request=request, status="done").exists)():
            await asyncio.sleep(0.02)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await sync_to_async(ResponseRequest.objects.filter(pk=request.pk).update)(
        lease_expires=timezone.now() - timedelta(seconds=1))
    await StreamRunner(str(request.pk), hub).run()
    saved = await reload(request)
    assert saved.status == "completed"
    calls = await calls_of(request)
    assert len(calls) == 1


def test_arguments_are_validated_before_anything_runs() -> None:
    with pytest.raises(ToolError, match="not valid JSON"):
        parse_arguments("get_weather", '{"location": "Par')
    with pytest.raises(ToolError, match="missing arguments: unit"):
        parse_arguments("get_weather", '{"location": "Paris"}')
    with pytest.raises(ToolError, match="unknown tool"):
        parse_arguments("rm_rf", "{}")
    assert '"location":"Paris"' in run_tool("get_weather", parse_arguments(
        "get_weather", '{"location": "Paris", "unit": "C"}'))
    assert set(offered()) == {"get_weather", "get_time"}


def test_a_call_id_is_claimed_once(db: Any, owner: Any) -> None:
    conversation = services.conversation_create(owner=owner)
    request, _ = services.request_create(owner=owner, input="x", model="sim-function", client_request_id="c",
                                         conversation=conversation)
    assert services.tool_call_claim(request_id=request.pk, call_id="call_1", name="get_time", arguments={})
    assert services.tool_call_claim(request_id=request.pk, call_id="call_1", name="get_time", arguments={}) is None

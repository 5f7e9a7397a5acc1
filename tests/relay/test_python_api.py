"""The Python API (responses_app.api) against the simulator over loopback: submit from sync and async
code, follow, wait, cancel; the signals, each once; host tools, run once per call id; a request
submitted where no runner lives reaches one within a second (the channel layer, PostgreSQL's
NOTIFY, or SQLite's watch of pending rows: whichever this run's database has)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.template import Context, Template
from django.test import RequestFactory

from responses_app import api, signals, tools
from responses_app.models import ResponseRequest, ToolCall
from responses_app.relay import worker
from responses_app.relay.hub import get_hub
from responses_app.submission import Refused
from tests.relay.helpers import FAST

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


def in_a_thread(function: Any) -> Any:
    """`function` in a thread of its own, as a WSGI worker or a task queue calls the API; the
    thread's database connection is given back after, as those close theirs (the pool is bounded)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        finally:
            connections.close_all()

    return sync_to_async(call, thread_sensitive=False)


@pytest.fixture
def heard() -> Any:
    """Every signal of the app, as (name, kwargs)."""
    found: list[tuple[str, dict[str, Any]]] = []
    def hear(name: str) -> Any:
        return lambda sender, **kw: found.append((name, kw))

    receivers = {name: hear(name) for name in ("request_started", "request_finished", "tool_called")}
    for name, receiver in receivers.items():
        getattr(signals, name).connect(receiver, weak=False)
    yield found
    for name, receiver in receivers.items():
        getattr(signals, name).disconnect(receiver)


async def test_asubmit_subscribe_and_await(owner: Any, heard: Any) -> None:
    request = await api.asubmit(owner, "Tell me about rivers", model="sim-text", metadata=FAST)
    kinds, last = [], None
    async for update in api.subscribe(request):
        kinds.append(update.kind)
        last = update
    done = await api.await_request(request, timeout=10)
    assert kinds[0] == "snapshot" and kinds[-1] == "terminal" and last is not None
    assert done.status == "completed" and last.status == "completed"
    text = "".join(b.get("text", "") for b in last.view["blocks"] if b.get("kind") == "text")
    assert text == done.final_text and text
    assert await api.aview(request) == last.view, "the committed view is the one followed"
    started = [kw for name, kw in heard if name == "request_started"]
    finished = [kw for name, kw in heard if name == "request_finished"]
    assert len(started) == 1 and started[0]["request"].pk == request.pk
    assert len(finished) == 1 and finished[0]["status"] == "completed" and finished[0]["usage"]


async def test_a_sync_submit_from_a_process_without_a_runner_starts_within_a_second(owner: Any) -> None:
    worker.ensure_worker()  # this process's runner (as a web process's), listening for starts
    await asyncio.sleep(0.3)  # its listener is up (PostgreSQL's LISTEN, or SQLite's watch)
    started = time.monotonic()
    request = await in_a_thread(api.submit)(
        owner, "From a task queue", model="sim-text", metadata=FAST)
    while (await sync_to_async(api.view)(request))["revision"] == 0 and \
            (await sync_to_async(ResponseRequest.objects.get)(pk=request.pk)).status == "pending":
        assert time.monotonic() - started < 1.0, "not started within a second"
        await asyncio.sleep(0.02)
    assert (await api.await_request(request, timeout=10)).status == "completed"


async def test_wait_and_view_from_sync_code(owner: Any) -> None:
    request = await api.asubmit(owner, "Hi", model="sim-text", metadata=FAST)
    done = await in_a_thread(api.wait)(request, timeout=10)
    assert done.status == "completed"
    assert (await sync_to_async(api.view)(request.pk))["meta"]["status"] == "completed"
    with pytest.raises(TimeoutError):
        slow = await api.asubmit(owner, "Slowly", model="sim-long", metadata={"sim.tokens_per_s": "5"})
        await in_a_thread(api.wait)(slow, timeout=0.3)
    assert await api.acancel(slow) is True
    assert (await api.await_request(slow, timeout=10)).status == "cancelled"
    assert await api.acancel(slow) is False, "an ended request has nothing to stop"


async def test_a_sync_cancel_reaches_the_runner(owner: Any) -> None:
    request = await api.asubmit(owner, "Slowly", model="sim-long", metadata={"sim.tokens_per_s": "5"})
    while get_hub().runner(str(request.pk)) is None:
        await asyncio.sleep(0.02)
    assert await in_a_thread(api.cancel)(request) is True
    assert (await api.await_request(request, timeout=15)).status == "cancelled"


async def test_refusals_say_why(owner: Any, settings: Any) -> None:
    settings.RELAY_ALLOWED_MODELS = ["sim-text"]
    with pytest.raises(Refused) as refused:
        await api.asubmit(owner, "Hi", model="sim-long")
    assert refused.value.status == 400 and "model" in refused.value.errors
    with pytest.raises(Refused) as unknown:
        await api.asubmit(owner, "Hi", model="sim-text", tools=["no_such_tool"])
    assert unknown.value.status == 400 and "no_such_tool" in unknown.value.message


@pytest.fixture
def host_tool() -> Any:
    calls: list[dict[str, Any]] = []

    @tools.tool(description="Look an order up.", parameters={
        "type": "object", "additionalProperties": False, "required": ["number"],
        "properties": {"number": {"type": "string"}}})
    def lookup_order(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        return {"status": "shipped"}

    yield lookup_order, calls
    tools._REGISTERED.pop("lookup_order", None)


async def test_a_host_tool_is_offered_called_once_and_heard(owner: Any, host_tool: Any, heard: Any,
                                                            settings: Any) -> None:
    settings.RELAY_TOOLS = []  # the host's tool alone, as a host that sets RELAY_TOOLS
    _tool, calls = host_tool
    assert [d["name"] for d in tools.tool_definitions()] == ["lookup_order"]
    request = await api.asubmit(owner, "Where is my order?", model="sim-function", metadata=FAST)
    done = await api.await_request(request, timeout=15)
    assert done.status == "completed"
    assert len(calls) == 1
    rows = await sync_to_async(list)(ToolCall.objects.filter(request=request).values_list("name", "status"))
    assert rows == [("lookup_order", "done")]
    tool_called = [kw for name, kw in heard if name == "tool_called"]
    assert len(tool_called) == 1 and tool_called[0]["name"] == "lookup_order" and tool_called[0]["ok"]
    only = await api.asubmit(owner, "Offer nothing", model="sim-text", metadata=FAST, tools=[])
    assert (await sync_to_async(ResponseRequest.objects.get)(pk=only.pk)).params["tools"] == []


async def test_a_failing_receiver_is_logged_and_breaks_nothing(owner: Any, caplog: Any) -> None:
    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("the host's receiver failed")

    signals.request_finished.connect(broken, weak=False)
    try:
        request = await api.asubmit(owner, "Hi", model="sim-text", metadata=FAST)
        assert (await api.await_request(request, timeout=10)).status == "completed"
    finally:
        signals.request_finished.disconnect(broken)
    assert "a receiver of a relay signal failed" in caplog.text


async def test_relay_response_embeds_the_committed_view(owner: Any) -> None:
    request = await api.asubmit(owner, "Embed me", model="sim-text", metadata=FAST)
    done = await api.await_request(request, timeout=10)

    def render() -> str:
        http = RequestFactory().get("/report/")
        http.user = owner
        template = Template("{% load relay %}{% relay_response started %}{% relay_response started %}")
        return template.render(Context({"request": http, "started": done}))

    html = await sync_to_async(render)()
    assert html.count('class="relay relay-embed"') == 2
    assert html.count('id="relay-urls"') == 1, "the assets once per page"
    assert "Embed me" in html and 'data-badge="completed"' in html
    assert "msg-user" not in html, "the answer alone unless prompt=True"

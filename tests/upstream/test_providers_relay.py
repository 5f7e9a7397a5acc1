"""Several providers at once, end to end: standalone simulators over real loopback HTTP as named
providers (RELAY_PROVIDERS), requests through the door (api.asubmit) and the hub's own clients.

Every call a client makes is recorded (which base URL, which body or response id) by wrapping the
real methods: the calls still go out and their answers are the simulators' own."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from responses_app import api, services
from responses_app.models import ResponseRequest, Segment
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.simulator.auth import DEV_API_KEY
from responses_app.upstream.http import Upstream
from responses_app.upstream.websocket import WebSocketUpstream
from tests.relay.helpers import FAST
from tests.servers import start_simulator, stop

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

AUTH = {"authorization": f"Bearer {DEV_API_KEY}"}
NOTHING = {"retrieve": False, "cancel": False, "background": False, "store": False}


@pytest.fixture(scope="module")
def simulators() -> Iterator[dict[str, str]]:
    """Three simulators of their own: alpha and beta keep responses, local keeps none (--stateless)."""
    started = {"alpha": start_simulator(), "beta": start_simulator(), "local": start_simulator(30.0, "--stateless")}
    try:
        yield {name: url for name, (_proc, url) in started.items()}
    finally:
        for proc, _url in started.values():
            stop(proc)


@pytest.fixture
def providers(settings: Any, simulators: dict[str, str]) -> dict[str, str]:
    settings.RELAY_PROVIDERS = {
        "alpha": {"label": "Alpha", "base_url": simulators["alpha"], "api_key": DEV_API_KEY,
                  "models": ["sim-text"], "simulator": True},
        "beta": {"label": "Beta", "base_url": simulators["beta"], "api_key": DEV_API_KEY,
                 "models": ["sim-reasoning", "sim-long"], "simulator": True},
        "local": {"label": "Local", "base_url": simulators["local"], "api_key": DEV_API_KEY,
                  "models": ["sim-citations", "sim-refusal", "sim-function"], "simulator": True, "supports": NOTHING},
        # beta's server again, as a provider that runs responses in the background but cannot cancel one
        "no-cancel": {"base_url": simulators["beta"], "api_key": DEV_API_KEY, "models": ["sim-mcp"],
                      "simulator": True, "supports": {"cancel": False}},
        "alpha-ws": {"base_url": simulators["alpha"], "api_key": DEV_API_KEY, "models": ["sim-image"],
                     "simulator": True, "transport": "websocket"},
    }
    return simulators


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, Any]]:
    """(what, base URL, body or response id) of every create, retrieve, resume and cancel."""
    found: list[tuple[str, str, Any]] = []
    create, retrieve, cancel, resume = (Upstream.create_stream, Upstream.retrieve, Upstream.cancel,
                                        Upstream.resume_stream)

    def create_stream(self: Upstream, body: dict[str, Any]) -> Any:
        found.append(("create", self.base, body))
        return create(self, body)

    async def retrieve_(self: Upstream, response_id: str) -> Any:
        found.append(("retrieve", self.base, response_id))
        return await retrieve(self, response_id)

    async def cancel_(self: Upstream, response_id: str) -> Any:
        found.append(("cancel", self.base, response_id))
        return await cancel(self, response_id)

    def resume_stream(self: Upstream, response_id: str, starting_after: int | None) -> Any:
        found.append(("resume", self.base, response_id))
        return resume(self, response_id, starting_after)

    monkeypatch.setattr(Upstream, "create_stream", create_stream)
    monkeypatch.setattr(Upstream, "retrieve", retrieve_)
    monkeypatch.setattr(Upstream, "cancel", cancel_)
    monkeypatch.setattr(Upstream, "resume_stream", resume_stream)
    return found


async def upstream_status(base: str, response_id: str) -> int:
    async with httpx.AsyncClient(headers=AUTH) as client:
        return (await client.get(f"{base}/responses/{response_id}")).status_code


async def until_confirmed(request: ResponseRequest, timeout: float = 20) -> ResponseRequest:
    """The request once the upstream confirmed it (its response id stored)."""
    async with asyncio.timeout(timeout):
        while True:
            current = await sync_to_async(ResponseRequest.objects.get)(pk=request.pk)
            if current.response_id:
                return current
            await asyncio.sleep(0.02)


@sync_to_async
def segments_of(request: ResponseRequest) -> list[Segment]:
    return list(Segment.objects.filter(request=request).order_by("index"))


def texts_of(items: list[dict[str, Any]]) -> str:
    return " ".join(part.get("text", "") if isinstance(part, dict) else str(part)
                    for item in items for part in (item["content"] if isinstance(item.get("content"), list)
                                                   else [item.get("content", "")]))


async def test_two_providers_serve_one_conversation_each_turn_its_own(
        owner: Any, providers: dict[str, str], calls: list[tuple[str, str, Any]]) -> None:
    first = await api.asubmit(owner, "Tell me about rivers", model="sim-text", metadata=FAST)
    first = await api.await_request(first, timeout=30)
    assert (first.status, first.provider) == ("completed", "alpha")
    second = await api.asubmit(owner, "And lakes?", model="sim-reasoning", conversation=first.conversation_id,
                               metadata=FAST)
    second = await api.await_request(second, timeout=30)
    assert (second.status, second.provider) == ("completed", "beta")

    creates = [(base, body) for what, base, body in calls if what == "create"]
    assert [base for base, _body in creates] == [providers["alpha"], providers["beta"]]
    beta_body = creates[1][1]
    # beta cannot know alpha's response ids: the turn carries the conversation instead of a chain
    assert not beta_body.get("previous_response_id")
    assert "Tell me about rivers" in texts_of(beta_body["input"])
    assert first.final_text[:40] in texts_of(beta_body["input"])
    assert [s.kind for s in await segments_of(second)] == ["initial"], "no refused chain first"
    # each response lives on the provider that made it, and only there
    assert await upstream_status(providers["alpha"], first.response_id) == 200
    assert await upstream_status(providers["beta"], first.response_id) == 404
    assert await upstream_status(providers["beta"], second.response_id) == 200

    third = await api.asubmit(owner, "Which is longer?", model="sim-long", conversation=first.conversation_id,
                              metadata={**FAST, "sim.tokens": "20"})
    third = await api.await_request(third, timeout=30)
    assert third.provider == "beta" and third.status == "completed"
    assert calls[-1][2]["previous_response_id"] == second.response_id, "the same provider chains"


async def test_stop_cancels_on_the_provider_that_serves_the_request(
        owner: Any, providers: dict[str, str], calls: list[tuple[str, str, Any]]) -> None:
    request = await api.asubmit(owner, "A long one", model="sim-long",
                                metadata={"sim.tokens_per_s": "100", "sim.seed": "3"})
    request = await until_confirmed(request)
    await api.acancel(request)
    request = await api.await_request(request, timeout=30)
    assert request.status == "cancelled"
    assert [(what, base, rid) for what, base, rid in calls if what == "cancel"] == [
        ("cancel", providers["beta"], request.response_id)]
    async with httpx.AsyncClient(headers=AUTH) as client:
        upstream = (await client.get(f"{providers['beta']}/responses/{request.response_id}")).json()
    assert upstream["status"] == "cancelled"
    assert await upstream_status(providers["alpha"], request.response_id) == 404


async def test_a_takeover_resumes_from_the_provider_that_served_the_request(
        owner: Any, providers: dict[str, str], calls: list[tuple[str, str, Any]]) -> None:
    """A runner that died after the upstream confirmed the response: the next one asks beta, not
    the implicit upstream (another simulator, which never heard of the response)."""
    async with httpx.AsyncClient(headers=AUTH) as client:
        started = (await client.post(f"{providers['beta']}/responses", json={
            "model": "sim-reasoning", "input": "Hello", "background": True, "metadata": FAST})).json()
    request, _ = await sync_to_async(services.request_create)(
        owner=owner, input="Hello", model="sim-reasoning", client_request_id="takeover-1",
        conversation=await sync_to_async(services.conversation_create)(owner=owner),
        params={"background": True, "metadata": FAST}, provider="beta")
    await sync_to_async(ResponseRequest.objects.filter(pk=request.pk).update)(
        response_id=started["id"], status="streaming", lease_expires=timezone.now() - timedelta(minutes=1))
    await StreamRunner(str(request.pk), get_hub()).run()
    saved = await sync_to_async(ResponseRequest.objects.get)(pk=request.pk)
    assert saved.status == "completed" and saved.final_text
    assert [(what, base) for what, base, _rid in calls] == [("resume", providers["beta"])]


async def test_a_provider_that_keeps_nothing_is_never_asked_to_retrieve(
        owner: Any, providers: dict[str, str], calls: list[tuple[str, str, Any]]) -> None:
    request = await api.asubmit(owner, "Cite something", model="sim-citations",
                                metadata={**FAST, "sim.drop_after": "6"})
    request = await api.await_request(request, timeout=30)
    assert request.provider == "local"
    assert request.params["background"] is False, "no background mode: nothing would resume it"
    assert request.status == "unknown" and request.error_code == "outcome_unknown"
    assert "cannot retrieve" in request.error_message
    (what, base, body), = calls  # one POST; no retrieve, no resume
    assert (what, base) == ("create", providers["local"])
    assert body["store"] is False and "background" not in body
    assert [s.kind for s in await segments_of(request)] == ["initial", "reconcile"]


@pytest.mark.parametrize("model", ["sim-citations", "sim-mcp"])  # local (keeps nothing), no-cancel
async def test_stop_on_a_provider_without_cancel_closes_the_stream(
        owner: Any, providers: dict[str, str], calls: list[tuple[str, str, Any]], model: str) -> None:
    request = await api.asubmit(owner, "Go slowly", model=model, metadata={"sim.tokens_per_s": "20", "sim.seed": "5"})
    request = await until_confirmed(request)
    await api.acancel(request)
    request = await api.await_request(request, timeout=10)
    assert request.status == "cancelled"
    assert [what for what, _base, _body in calls] == ["create"], "no cancel call to a provider without one"


async def test_turns_on_a_provider_that_does_not_store_carry_the_conversation(
        owner: Any, providers: dict[str, str], calls: list[tuple[str, str, Any]]) -> None:
    first = await api.asubmit(owner, "Tell me about rivers", model="sim-citations", metadata=FAST)
    first = await api.await_request(first, timeout=30)
    second = await api.asubmit(owner, "And lakes?", model="sim-refusal", conversation=first.conversation_id,
                               metadata=FAST)
    second = await api.await_request(second, timeout=30)
    assert (first.status, second.status) == ("completed", "completed")
    body = [body for what, _base, body in calls if what == "create"][1]
    assert not body.get("previous_response_id") and body["store"] is False
    assert "Tell me about rivers" in texts_of(body["input"]) and "And lakes?" in texts_of(body["input"])


async def test_a_tool_round_on_a_provider_that_does_not_store_sends_the_whole_turn(
        owner: Any, providers: dict[str, str], calls: list[tuple[str, str, Any]]) -> None:
    request = await api.asubmit(owner, "What is the weather in Paris?", model="sim-function", metadata=FAST)
    request = await api.await_request(request, timeout=30)
    assert request.status == "completed", request.error_message
    first, then = [body for what, _base, body in calls if what == "create"]
    assert not then.get("previous_response_id"), "nothing to chain to on a provider that keeps nothing"
    assert [item.get("type") for item in then["input"]][-2:] == ["function_call", "function_call_output"]
    assert "What is the weather in Paris?" in texts_of(then["input"]), "this turn's input again"
    assert first["store"] is False and then["store"] is False


async def test_a_request_of_a_provider_since_removed_ends_error_saying_so(
        owner: Any, providers: dict[str, str], calls: list[tuple[str, str, Any]]) -> None:
    """Never sent to another provider instead (with another key, another model namespace)."""
    request, _ = await sync_to_async(services.request_create)(
        owner=owner, input="Hello", model="sim-text", client_request_id="gone-1",
        conversation=await sync_to_async(services.conversation_create)(owner=owner),
        params={"background": True, "metadata": FAST}, provider="retired")
    await StreamRunner(str(request.pk), get_hub()).run()
    saved = await sync_to_async(ResponseRequest.objects.get)(pk=request.pk)
    assert saved.status == "error" and "'retired'" in saved.error_message
    assert "no longer configured" in saved.error_message
    assert calls == [], "nothing reached any provider"


async def test_each_provider_has_its_own_transport(owner: Any, providers: dict[str, str]) -> None:
    """alpha-ws is alpha's server over WebSocket mode: its requests go over a socket of its own,
    while alpha's go over SSE, in the same process."""
    hub = get_hub()
    try:
        over_ws = await api.asubmit(owner, "Draw", model="sim-image", metadata=FAST)
        over_sse = await api.asubmit(owner, "Say", model="sim-text", metadata=FAST)
        over_ws, over_sse = await api.await_request(over_ws, 30), await api.await_request(over_sse, 30)
        assert (over_ws.status, over_ws.provider, over_sse.status, over_sse.provider) == (
            "completed", "alpha-ws", "completed", "alpha")
        socket = hub._upstreams["alpha-ws"]
        assert isinstance(socket, WebSocketUpstream) and socket.connections == 1
        assert socket.base == providers["alpha"]
        assert await upstream_status(providers["alpha"], over_ws.response_id) == 200
    finally:
        if "alpha-ws" in hub._upstreams:
            await hub._upstreams.pop("alpha-ws").aclose()

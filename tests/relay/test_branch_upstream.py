"""The branch's history, sent upstream for real: the simulator over loopback HTTP sees a
regenerated turn chained to the answer before it, and a forgotten chain is sent as the branch's
turns, never another version's."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from responses_app import submission
from responses_app.models import ResponseRequest
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from tests.relay.test_runner_faults import SIM_AUTH

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def test_a_regenerated_answer_is_chained_upstream_to_the_answer_before_its_turn(
        owner: Any, simulator_url: str) -> None:
    def ask(text: str, conversation: Any = None, replaces: Any = None) -> ResponseRequest:
        data = {"input": text, "model": "sim-text", "client_request_id": str(uuid.uuid4()), "background": "false",
                "metadata": json.dumps({"sim.tokens_per_s": "0"}),
                **({"conversation": str(conversation)} if conversation else {})}
        if replaces is not None:
            data = submission.resend_data(replaces, client_request_id=str(uuid.uuid4()))
        return submission.submit(user=owner, data=data, replaces=replaces).request

    async def run(request: ResponseRequest) -> ResponseRequest:
        await StreamRunner(str(request.pk), get_hub()).run()
        return await sync_to_async(ResponseRequest.objects.get)(pk=request.pk)

    a = await run(await sync_to_async(ask)("Tell me about rivers"))
    b = await run(await sync_to_async(ask)("And lakes?", a.conversation_id))
    await run(await sync_to_async(ask)("And seas?", a.conversation_id))
    b2 = await run(await sync_to_async(ask)("", replaces=b))
    assert [t.status for t in (a, b, b2)] == ["completed"] * 3
    async with httpx.AsyncClient(headers=SIM_AUTH) as http:
        sent = (await http.get(f"{simulator_url}/responses/{b2.response_id}")).json()
    assert sent["previous_response_id"] == a.response_id, "the answer before the regenerated turn, not the last one"
    assert b2.input == "And lakes?" and b2.parent_id == a.pk


async def test_a_forgotten_chain_is_sent_as_the_branch_s_turns(
        owner: Any, full_context_bodies: list[dict[str, Any]]) -> None:
    sent = full_context_bodies  # the relay/conftest.py fixture

    def ask(text: str, conversation: Any = None, replaces: Any = None) -> ResponseRequest:
        data = {"input": text, "model": "sim-text", "client_request_id": str(uuid.uuid4()), "background": "false",
                "metadata": json.dumps({"sim.tokens_per_s": "0"}),
                **({"conversation": str(conversation)} if conversation else {})}
        if replaces is not None:
            data = submission.resend_data(replaces, client_request_id=str(uuid.uuid4()), input=text)
        return submission.submit(user=owner, data=data, replaces=replaces).request

    async def run(request: ResponseRequest) -> ResponseRequest:
        await StreamRunner(str(request.pk), get_hub()).run()
        return await sync_to_async(ResponseRequest.objects.get)(pk=request.pk)

    a = await run(await sync_to_async(ask)("Rivers"))
    b = await run(await sync_to_async(ask)("Lakes", a.conversation_id))
    await run(await sync_to_async(ask)("Seas", a.conversation_id))
    b2 = await run(await sync_to_async(ask)("Ponds", replaces=b))
    # The upstream forgot the branch's last answer (a restart of the embedded simulator, an expiry).
    await sync_to_async(ResponseRequest.objects.filter(pk=b2.pk).update)(response_id="resp_forgotten")
    d = await run(await sync_to_async(ask)("And then?", a.conversation_id))
    assert d.status == "completed" and d.parent_id == b2.pk
    assert d.params["previous_response_id"] == "resp_forgotten"
    assert len(sent) == 1 and sent[0]["previous_response_id"] is None
    assert [item["content"] for item in sent[0]["input"]] == [
        "Rivers", a.final_text, "Ponds", b2.final_text, "And then?"], "this branch's turns, not Lakes nor Seas"

"""Continue, sent upstream for real: the simulator over loopback HTTP gets a continuation chained to
the answer that was cut short (`previous_response_id`), or the branch as input when it was stopped,
and answers with the rest of the text; the turn shows the parts as one answer, and continuing
again chains again."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from responses_app import continuing, submission
from responses_app.models import Conversation, ResponseRequest
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.simulator.texts import PARAGRAPHS
from tests.relay.test_runner_faults import SIM_AUTH

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


def ask(owner: Any, text: str, model: str = "sim-incomplete", **extra: Any) -> ResponseRequest:
    data = {"input": text, "model": model, "client_request_id": str(uuid.uuid4()), "background": "false",
            "metadata": json.dumps({"sim.tokens_per_s": "0", "sim.seed": "3"}), **extra}
    return submission.submit(user=owner, data=data).request


def go_on(owner: Any, source: ResponseRequest) -> ResponseRequest:
    data = submission.continue_data(source, client_request_id=str(uuid.uuid4()))
    return submission.submit(user=owner, data=data, continues=source).request


async def run(request: ResponseRequest) -> ResponseRequest:
    await StreamRunner(str(request.pk), get_hub()).run()
    return await sync_to_async(ResponseRequest.objects.get)(pk=request.pk)


async def test_a_cut_short_answer_goes_on_chained_to_its_response_and_reads_as_one(
        owner: Any, simulator_url: str) -> None:
    a = await run(await sync_to_async(ask)(owner, "Tell me about rivers"))
    assert a.status == "incomplete" and a.final_text
    b = await run(await sync_to_async(go_on)(owner, a))
    assert b.status == "completed" and b.continues_id == a.pk and b.parent_id == a.pk
    assert b.params["previous_response_id"] == a.response_id and "full_context" not in b.params
    async with httpx.AsyncClient(headers=SIM_AUTH) as http:
        sent = (await http.get(f"{simulator_url}/responses/{b.response_id}")).json()
    assert sent["previous_response_id"] == a.response_id
    # The paragraph the first part stopped in is whole in the joined answer: the text went on.
    tail = a.final_text.rsplit("\n\n", 1)[-1]
    joined = a.final_text + b.final_text
    assert any(p.startswith(tail) and p != tail and p in joined for p in PARAGRAPHS), (tail, b.final_text)
    conversation = await sync_to_async(Conversation.objects.get)(pk=a.conversation_id)
    turns = await sync_to_async(continuing.conversation_turns)(conversation=conversation)
    assert len(turns) == 1, "one turn, one answer"
    (turn,) = turns
    assert turn.head.pk == a.pk and turn.request.pk == b.pk and turn.text == joined
    texts = [block["text"] for block in turn.view["blocks"] if block["kind"] == "text"]
    assert texts == [joined], "one answer text in the view"
    assert (await sync_to_async(continuing.turn_of)(a)).text == joined, "the turn as its first part names it"


async def test_continuing_again_chains_and_each_part_is_a_request_of_its_own(owner: Any) -> None:
    a = await run(await sync_to_async(ask)(owner, "Rivers", max_output_tokens=8))
    b = await run(await sync_to_async(go_on)(owner, a))
    assert b.status == "incomplete", "the continuation keeps the turn's output cap"
    c = await run(await sync_to_async(go_on)(owner, b))
    assert c.params["previous_response_id"] == b.response_id and c.continues_id == b.pk
    conversation = await sync_to_async(Conversation.objects.get)(pk=a.conversation_id)
    (turn,) = await sync_to_async(continuing.conversation_turns)(conversation=conversation)
    assert [part.pk for part in turn.parts] == [a.pk, b.pk, c.pk]
    assert turn.text == a.final_text + b.final_text + c.final_text
    assert await sync_to_async(ResponseRequest.objects.filter(conversation=conversation).count)() == 3
    # The next turn follows the last part, and the tabs name the turn by its first part.
    assert await sync_to_async(continuing.branches.chosen_path_ids)(conversation.pk) == [str(a.pk)]


async def test_a_stopped_answer_goes_on_from_the_text_shown(
        owner: Any, full_context_bodies: list[dict[str, Any]]) -> None:
    sent = full_context_bodies  # the relay/conftest.py fixture
    a = await sync_to_async(ask)(owner, "Lakes", model="sim-text")
    partial = PARAGRAPHS[2][:40]
    await sync_to_async(ResponseRequest.objects.filter(pk=a.pk).update)(
        status="cancelled", final_text=partial, response_id="resp_stopped")
    a = await sync_to_async(ResponseRequest.objects.get)(pk=a.pk)
    b = await run(await sync_to_async(go_on)(owner, a))
    assert b.status == "completed" and b.params.get("full_context") is True
    assert "previous_response_id" not in b.params, "a stopped response is not chained to: its text is sent"
    assert [item["content"] for item in sent[0]["input"]] == ["Lakes", partial, continuing.INSTRUCTION]
    assert (partial + b.final_text).startswith(PARAGRAPHS[2]), "the rest of the paragraph it stopped in"

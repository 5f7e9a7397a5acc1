"""Provider fields of any length are stored whole, on every database: an id hundreds of characters
long (LiteLLM's proxy sends 441) must not leave a request streaming for good. Runs on SQLite and,
with DATABASE_URL, on PostgreSQL, where a column's length is enforced."""

from __future__ import annotations

import random
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from responses_app import services
from responses_app.models import Conversation, McpApproval, ResponseRequest, Segment, ToolCall
from responses_app.tools import tool_definitions
from tests.relay.helpers import Watcher, connect, make_request, reload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

LONG = "441"  # LiteLLM's proxy: its response ids encode the deployment and the model


async def watch_to_end(user: Any, request: ResponseRequest, timeout: float = 30) -> Watcher:
    communicator = await connect(user, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    await watcher.until_terminal(timeout)
    await communicator.disconnect()
    return watcher


async def test_a_response_id_of_441_characters_is_stored_whole(owner: Any) -> None:
    request = await make_request(owner, "sim-text", {"sim.id_length": LONG})
    watcher = await watch_to_end(owner, request)
    saved = await reload(request)
    assert watcher.terminal is not None and watcher.terminal["status"] == saved.status == "completed"
    assert len(saved.response_id) == 441 and saved.response_id.startswith("resp_")
    assert saved.final_text and watcher.text() == saved.final_text
    ids = await sync_to_async(lambda: list(Segment.objects.filter(request=saved).values_list("response_id",
                                                                                             flat=True)))()
    assert ids and all(i == saved.response_id for i in ids)
    last = await sync_to_async(lambda: Conversation.objects.get(pk=saved.conversation_id).last_response_id)()
    assert last == saved.response_id, "the next turn chains to the whole id"


async def test_the_next_turn_chains_to_a_long_previous_response_id(owner: Any) -> None:
    first = await make_request(owner, "sim-text", {"sim.id_length": LONG})
    await watch_to_end(owner, first)
    first = await reload(first)

    @sync_to_async
    def follow_up() -> ResponseRequest:
        conversation = Conversation.objects.get(pk=first.conversation_id)
        request, _ = services.request_create(
            owner=owner, input="And then?", model="sim-text", client_request_id="second-turn",
            conversation=conversation,
            params={"background": True, "previous_response_id": conversation.last_response_id,
                    "metadata": {"sim.tokens_per_s": "0", "sim.seed": "8", "sim.id_length": LONG}})
        return request

    second = await follow_up()
    await watch_to_end(owner, second)
    saved = await reload(second)
    assert saved.status == "completed" and len(saved.response_id) == 441 and saved.response_id != first.response_id


async def test_long_call_ids_run_once_and_the_answer_uses_them(owner: Any) -> None:
    @sync_to_async
    def tool_request() -> ResponseRequest:
        conversation = services.conversation_create(owner=owner)
        request, _ = services.request_create(
            owner=owner, input="What's the weather in Paris?", model="sim-function", client_request_id="long-tools",
            conversation=conversation,
            params={"background": True, "tools": tool_definitions(),
                    "metadata": {"sim.tokens_per_s": "0", "sim.seed": "5", "sim.id_length": LONG}})
        return request

    request = await tool_request()
    await watch_to_end(owner, request)
    saved = await reload(request)
    assert saved.status == "completed"
    calls = await sync_to_async(lambda: list(ToolCall.objects.filter(request=saved)))()
    assert len(calls) == 1 and calls[0].status == "done" and len(calls[0].call_id) == 441


@pytest.mark.parametrize("length", [441, 3000, 20_000])
async def test_provider_fields_of_any_length_are_stored_and_found(owner: Any, length: int) -> None:
    """Past the size limit of a PostgreSQL btree entry too: lookups go through digests."""
    request = await make_request(owner, "sim-text")
    long_id = random.Random(length).randbytes(length).hex()[:length]  # incompressible, as an index entry

    @sync_to_async
    def store_and_find() -> None:
        services.request_set_response_id(request_id=request.pk, response_id="resp_" + long_id, at=request.created)
        assert ResponseRequest.objects.get(response_id="resp_" + long_id).pk == request.pk
        segment = services.segment_start(request_id=request.pk, index=9, kind="initial", response_id="resp_" + long_id)
        services.segment_end(segment_id=segment.pk, outcome="completed", events=1, response_id="resp_" + long_id)
        claimed = services.tool_call_claim(request_id=request.pk, call_id="call_" + long_id, name="n" * length,
                                           arguments={})
        assert claimed is not None
        assert services.tool_call_claim(request_id=request.pk, call_id="call_" + long_id, name="again",
                                        arguments={}) is None, "a call id runs once, however long"
        services.tool_call_finish(request_id=request.pk, call_id="call_" + long_id, output="done", ok=True)
        assert ToolCall.objects.get(request_id=request.pk).status == "done"
        assert services.mcp_approval_decide(request=request, approval_request_id="mcpr_" + long_id, approve=True,
                                            user=owner)
        assert not services.mcp_approval_decide(request=request, approval_request_id="mcpr_" + long_id,
                                                approve=False, user=owner)
        assert McpApproval.objects.get(request_id=request.pk).approve is True
        services.request_acquire_lease(request_id=request.pk, token=request.pk)
        assert services.request_mark_terminal(
            request_id=request.pk, token=request.pk, status="failed", at=request.created,
            error_code="e" * length, error_message="m" * length, incomplete_reason="r" * length,
            response_id="resp_" + long_id)

    await store_and_find()
    saved = await reload(request)
    assert saved.status == "failed" and saved.error_code.startswith("eeee") and saved.incomplete_reason.startswith("rr")
    assert len(saved.response_id) == length + 5

"""MCP approvals: the runner waits for a person's answer, stored once, and sends it as an
`mcp_approval_response` continuation in the same logical request (simulator over real HTTP)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from responses_app import selectors
from responses_app.models import Checkpoint, McpApproval, Segment
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.viewers.follow import approvals_asked
from tests.relay.helpers import make_request, reload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def awaiting(runner: StreamRunner, timeout: float = 20) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        while True:
            blocks = [b for b in runner.view.to_dict()["blocks"] if b.get("tool") == "mcp_approval_request"]
            if blocks and blocks[0]["state"] == "awaiting_approval":
                return blocks[0]
            await asyncio.sleep(0.02)


async def asking(owner: Any) -> tuple[Any, StreamRunner, asyncio.Task[None], dict[str, Any]]:
    """A request of the approval scenario, running here until it waits: its runner, the runner's
    task and the approval request's block."""
    request = await make_request(owner, "sim-mcp-approval", background=False)
    runner = StreamRunner(str(request.pk), get_hub())
    task = asyncio.get_running_loop().create_task(runner.run())
    return request, runner, task, await awaiting(runner)


async def client_for(user: Any) -> AsyncClient:
    client = AsyncClient(enforce_csrf_checks=False)
    await sync_to_async(client.force_login)(user)
    return client


def approve_url(request_id: Any, approval_id: str) -> str:
    return f"/api/requests/{request_id}/approvals/{approval_id}"


@pytest.mark.parametrize("approve", [True, False])
async def test_an_approval_is_asked_answered_once_and_sent_as_a_continuation(owner: Any, staff: Any,
                                                                            approve: bool) -> None:
    request, runner, task, block = await asking(owner)
    assert runner.view.meta["status"] == "waiting_for_approval"
    approval_id = block["item_id"]
    assert (await reload(request)).status == "streaming", "the request waits, it has not ended"

    staff_client = await client_for(staff)
    refused = await staff_client.post(approve_url(request.pk, approval_id), json.dumps({"approve": True}),
                                      content_type="application/json")
    assert refused.status_code == 403, "staff may watch, only the owner answers"
    owner_client = await client_for(owner)
    unknown = await owner_client.post(approve_url(request.pk, "mcpr_nope"), json.dumps({"approve": True}),
                                      content_type="application/json")
    assert unknown.status_code == 404
    bad = await owner_client.post(approve_url(request.pk, approval_id), json.dumps({"approve": "yes"}),
                                  content_type="application/json")
    assert bad.status_code == 400
    answered = await owner_client.post(approve_url(request.pk, approval_id), json.dumps({"approve": approve}),
                                       content_type="application/json")
    assert answered.status_code == 201
    again = await owner_client.post(approve_url(request.pk, approval_id), json.dumps({"approve": not approve}),
                                    content_type="application/json")
    assert again.status_code == 409, "a second answer is refused"

    await asyncio.wait_for(task, 30)
    saved = await reload(request)
    assert saved.status == "completed"
    expected = "With your approval I rolled" if approve else "You did not approve"
    assert expected in saved.final_text
    state = next(b["state"] for b in runner.view.to_dict()["blocks"] if b.get("item_id") == approval_id)
    assert state == ("approved" if approve else "denied")
    kinds = await sync_to_async(lambda: list(Segment.objects.filter(request=saved).order_by("index")
                                             .values_list("kind", flat=True)))()
    assert kinds == ["initial", "continuation"], "one logical request"
    rows = await sync_to_async(lambda: list(McpApproval.objects.filter(request=saved).values_list(
        "approval_request_id", "approve", "decided_by_id")))()
    assert rows == [(approval_id, approve, owner.pk)], "stored once, audited with who answered"


async def test_stop_while_an_approval_is_awaited_ends_cancelled(owner: Any) -> None:
    request, runner, task, _block = await asking(owner)
    runner.cancel()
    await asyncio.wait_for(task, 20)
    saved = await reload(request)
    assert saved.status == "cancelled"
    assert runner.view.meta["status"] == "cancelled"



async def committed_view(request: Any) -> dict[str, Any]:
    return await sync_to_async(selectors.view_latest)(request=await reload(request))


@pytest.mark.parametrize("where", ["here", "elsewhere"])
async def test_an_answer_before_the_question_is_committed_is_taken(owner: Any, monkeypatch: Any,
                                                                    where: str) -> None:
    # A tab draws the question from its patch, before the writer commits it, and the person answers
    # at once: judged on the committed view alone, a quick Approve was lost (404). Here the commit
    # is made to lag: taken out, it comes back later.
    request, runner, task, block = await asking(owner)
    async with asyncio.timeout(10):  # the writer is done: nothing of the question is in flight
        while not any(b.get("state") == "awaiting_approval" for b in (await committed_view(request))["blocks"]):
            await asyncio.sleep(0.05)
    rows = await sync_to_async(lambda: list(Checkpoint.objects.filter(request=request)))()
    await sync_to_async(lambda: Checkpoint.objects.filter(request=request).delete())()
    assert block["item_id"] not in approvals_asked(await committed_view(request))
    if where == "elsewhere":  # the answer reaches a process with neither the runner nor its patches
        hub = get_hub()
        monkeypatch.setattr(hub, "runner", lambda request_id: None)
        monkeypatch.setattr(hub, "recent_patches", lambda request_id: [])

    async def committed_later() -> None:
        await asyncio.sleep(0.6)
        await sync_to_async(Checkpoint.objects.bulk_create)(rows)

    later = asyncio.get_running_loop().create_task(committed_later())
    client = await client_for(owner)
    answered = await client.post(approve_url(request.pk, block["item_id"]), json.dumps({"approve": True}),
                                 content_type="application/json")
    assert answered.status_code == 201, answered.content
    await later
    started = time.monotonic()
    unknown = await client.post(approve_url(request.pk, "mcpr_nope"), json.dumps({"approve": True}),
                                content_type="application/json")
    assert unknown.status_code == 404 and time.monotonic() - started < 1, "a view waiting shows every question"
    await asyncio.wait_for(task, 30)
    saved = await reload(request)
    assert saved.status == "completed" and "With your approval I rolled" in saved.final_text


async def test_an_unknown_answer_to_an_ended_request_is_refused_at_once(owner: Any) -> None:
    request = await make_request(owner, "sim-text", background=False)
    await StreamRunner(str(request.pk), get_hub()).run()
    client = await client_for(owner)
    started = time.monotonic()
    refused = await client.post(approve_url(request.pk, "mcpr_nope"), json.dumps({"approve": True}),
                                content_type="application/json")
    assert refused.status_code == 404 and time.monotonic() - started < 1

"""A runner that crashes, and cannot even write its request's ending, does not leave the request
streaming for good: after a bounded number of takeovers it ends `failed` (`relay_crashed`), says
which error in the log and on the chat page, and its user's concurrent slot is free again."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import DataError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from responses_app import limits, selectors, services
from responses_app.models import ResponseRequest
from responses_app.relay import worker
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from tests.relay.helpers import Watcher, connect, make_request, reload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


async def wait_ended(request: ResponseRequest, timeout: float) -> ResponseRequest:
    async with asyncio.timeout(timeout):
        while (saved := await reload(request)).status in ("pending", "streaming"):
            await asyncio.sleep(0.05)
    return saved


@sync_to_async
def chat_page(user: Any, request: ResponseRequest) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(reverse("responses_app:chat", args=[request.conversation_id]))
    assert response.status_code == 200
    return response.content.decode()


async def test_a_runner_that_cannot_write_its_ending_ends_failed_after_bounded_takeovers(
        owner: Any, monkeypatch: Any, caplog: Any) -> None:
    def refused(**kwargs: Any) -> bool:  # the row refuses the outcome, as a varchar refused a long id
        raise DataError("value too long for type character varying(128)")

    monkeypatch.setattr(services, "request_mark_terminal", refused)
    monkeypatch.setattr(services, "LEASE_SECONDS", 1)
    monkeypatch.setattr(worker, "SWEEP_S", 0.2)
    caplog.set_level(logging.WARNING)
    request = await make_request(owner, "sim-text")
    first = StreamRunner(str(request.pk), get_hub())
    await first.run()
    assert (await reload(request)).status == "streaming", "the first crash is taken over, not final"
    communicator = await connect(owner, request.pk)  # a viewer, told the outcome when it comes
    await communicator.connect()
    watcher = Watcher(communicator)
    worker.ensure_worker()  # the sweep takes it over, again and again, but not for ever
    saved = await wait_ended(request, timeout=30)
    terminal = await watcher.until_terminal(10)
    await communicator.disconnect()
    assert terminal["status"] == "failed" and terminal["error"]["code"] == services.RELAY_CRASHED
    assert saved.status == "failed" and saved.error_code == services.RELAY_CRASHED
    assert "DataError" in saved.error_message and "character varying" in saved.error_message
    assert saved.takeovers == services.MAX_TAKEOVERS
    assert saved.lease_expires is None and saved.terminal_at is not None
    assert await sync_to_async(limits.in_flight)(user_id=owner.pk) == 0, "the user's slot is free"
    crashed = [r.getMessage() for r in caplog.records if "relay_crashed" in r.getMessage()]
    assert len(crashed) == 1 and "DataError" in crashed[0] and str(request.pk) in crashed[0]
    page = await chat_page(owner, saved)
    assert "relay_crashed" in page or "could not carry this request" in page


async def test_a_request_whose_runners_keep_dying_ends_failed(owner: Any, monkeypatch: Any) -> None:
    """Runners that die without a word (a process killed while it streams) count too."""
    request = await make_request(owner, "sim-text")

    @sync_to_async
    def died_again_and_again() -> None:
        ResponseRequest.objects.filter(pk=request.pk).update(
            status="streaming", takeovers=services.MAX_TAKEOVERS, runner_token=uuid.uuid4(),  # held when it died
            lease_expires=timezone.now() - timedelta(seconds=1))

    await died_again_and_again()
    runner = StreamRunner(str(request.pk), get_hub())
    await runner.run()
    saved = await reload(request)
    assert saved.status == "failed" and saved.error_code == services.RELAY_CRASHED
    assert saved.takeovers == services.MAX_TAKEOVERS + 1
    assert await sync_to_async(limits.in_flight)(user_id=owner.pk) == 0


async def test_a_runner_that_cannot_read_its_request_is_bounded_too(owner: Any, monkeypatch: Any) -> None:
    def unreadable(**kwargs: Any) -> Any:
        raise RuntimeError("the row cannot be read")

    monkeypatch.setattr(selectors, "request_get", unreadable)
    request = await make_request(owner, "sim-text")
    for _ in range(services.MAX_TAKEOVERS + 1):
        await StreamRunner(str(request.pk), get_hub()).run()
        saved = await reload(request)
        if saved.status == "streaming":
            assert saved.lease_expires is not None and saved.lease_expires <= timezone.now(), "taken over at once"
    assert saved.status == "failed" and "RuntimeError: the row cannot be read" in saved.error_message


async def test_a_crash_whose_ending_is_written_ends_at_once(owner: Any, monkeypatch: Any) -> None:
    """Only a runner that cannot write its ending is taken over: one that can ends its request."""
    def broken(**kwargs: Any) -> None:
        raise RuntimeError("a bug in the loop")

    monkeypatch.setattr(services, "segment_start", broken)
    request = await make_request(owner, "sim-text")
    await StreamRunner(str(request.pk), get_hub()).run()
    saved = await reload(request)
    assert saved.status == "error" and saved.error_code == "relay_error" and saved.takeovers == 0


@pytest.mark.django_db
def test_a_request_handed_over_is_not_counted_as_a_crash(owner: Any) -> None:
    """A stopping process hands its streams over (request_release_lease: no runner token): however
    many rolling deploys an answer lives through, it never nears MAX_TAKEOVERS. A lease that ran out
    with its runner's token still set (the runner died) counts."""
    request = async_to_sync(make_request)(owner, "sim-text")
    for _ in range(services.MAX_TAKEOVERS + 2):  # more deploys than the crash bound
        token = uuid.uuid4()
        assert services.request_acquire_lease(request_id=request.pk, token=token)
        assert services.request_release_lease(request_id=request.pk, token=token)
    assert ResponseRequest.objects.get(pk=request.pk).takeovers == 0
    token = uuid.uuid4()
    assert services.request_acquire_lease(request_id=request.pk, token=token)
    ResponseRequest.objects.filter(pk=request.pk).update(lease_expires=timezone.now() - timedelta(seconds=1))
    assert services.request_acquire_lease(request_id=request.pk, token=uuid.uuid4())
    assert ResponseRequest.objects.get(pk=request.pk).takeovers == 1

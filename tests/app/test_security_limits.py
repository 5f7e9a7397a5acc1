"""Per-user limits: in-flight requests (RELAY_MAX_CONCURRENT_PER_USER) and the submit rate
(RELAY_SUBMIT_RATE). Beyond either the API answers 429 with Retry-After and a code, the page says
why and keeps the prompt, a resubmit is never refused, and other users are not affected."""

from __future__ import annotations

import asyncio
import contextvars
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from responses_app import limits
from responses_app.models import ResponseRequest

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_upstream(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.RELAY_UPSTREAM_BASE_URL = ""
    settings.RELAY_UPSTREAM_BASE_URL = ""
    settings.RELAY_SIMULATOR_BASE_URL = "http://127.0.0.1:9/simulator/v1"
    cache.clear()

    async def fake_start(request_id: str) -> None:
        return None

    monkeypatch.setattr("responses_app.relay.worker.start_request", fake_start)


def login(name: str) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_user(name, password="pw"))
    return client


def submit(client: Client, key: str | None = None) -> Any:
    body = {"input": "hi", "model": "sim-text", "client_request_id": key or str(uuid.uuid4())}
    return client.post(reverse("responses_app:api-requests"), json.dumps(body), content_type="application/json")


def test_in_flight_limit_is_429_with_retry_after_and_frees_when_one_ends(settings: Any) -> None:
    settings.RELAY_MAX_CONCURRENT_PER_USER = 2
    alice, bob = login("alice"), login("bob")
    first = submit(alice, "first")
    assert first.status_code == 201 and submit(alice).status_code == 201
    refused = submit(alice)
    assert refused.status_code == 429
    assert refused.json()["code"] == "too_many_requests_in_flight"
    assert int(refused["Retry-After"]) > 0
    assert submit(alice, "first").status_code == 200, "a resubmit starts nothing and is never refused"
    assert submit(bob).status_code == 201, "another user's limit is their own"
    ResponseRequest.objects.filter(pk=first.json()["id"]).update(status=ResponseRequest.Status.COMPLETED)
    assert submit(alice).status_code == 201


def test_a_streaming_request_whose_runner_died_does_not_hold_a_slot(settings: Any) -> None:
    settings.RELAY_MAX_CONCURRENT_PER_USER = 1
    alice = login("alice")
    made = submit(alice)
    ResponseRequest.objects.filter(pk=made.json()["id"]).update(
        status=ResponseRequest.Status.STREAMING, lease_expires=timezone.now() - timedelta(seconds=1))
    assert submit(alice).status_code == 201


def test_submit_rate_is_429_until_the_window_ends(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    import types

    # in the middle of a window: the wall clock may cross a minute between two submits under load
    monkeypatch.setattr(limits, "time", types.SimpleNamespace(time=lambda: 6_000_030.0, monotonic=time.monotonic,
                                                              sleep=time.sleep))
    settings.RELAY_MAX_CONCURRENT_PER_USER = 100
    settings.RELAY_SUBMIT_RATE = (3, 60)
    alice, bob = login("alice"), login("bob")
    assert [submit(alice).status_code for _ in range(3)] == [201, 201, 201]
    refused = submit(alice)
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert ResponseRequest.objects.filter(owner__username="alice").count() == 3
    assert submit(bob).status_code == 201


def test_the_rate_window_is_counted_in_the_cache_and_rolls_over(settings: Any) -> None:
    settings.RELAY_SUBMIT_RATE = (2, 60)
    assert limits._rate_check(user_id=1, now=120.0) is None
    assert limits._rate_check(user_id=1, now=130.0) is None
    refusal = limits._rate_check(user_id=1, now=179.5)
    assert refusal is not None and refusal.retry_after == 1
    assert limits._rate_check(user_id=1, now=180.0) is None, "a new window"


def test_the_page_shows_the_reason_and_keeps_the_typed_prompt(settings: Any) -> None:
    settings.RELAY_MAX_CONCURRENT_PER_USER = 1
    alice = login("alice")
    assert submit(alice).status_code == 201
    page = alice.post(reverse("responses_app:conversation-new"), {
        "input": "a prompt I typed with care", "model": "sim-text", "client_request_id": str(uuid.uuid4())})
    assert page.status_code == 429 and int(page["Retry-After"]) > 0
    text = page.content.decode()
    assert "a prompt I typed with care" in text and "You have 1 answer running" in text and "RELAY_" not in text
    conversation = ResponseRequest.objects.get().conversation
    assert conversation is not None
    chat = alice.post(reverse("responses_app:chat", args=[conversation.pk]), {
        "input": "a reply I typed", "model": "sim-text", "client_request_id": str(uuid.uuid4())})
    assert chat.status_code == 429 and "a reply I typed" in chat.content.decode()
    assert ResponseRequest.objects.count() == 1


async def test_every_socket_task_shares_one_cache_client() -> None:
    """Django's `cache` is one object per asyncio context: a socket's slot and cancel calls made
    through it built a cache client (with Redis, a connection pool) per socket task, and the
    pools' connections outlived the sockets."""
    from django.core.cache import caches

    async def used() -> tuple[object, object]:
        await asyncio.sleep(0)
        return caches["default"], limits.process_cache()

    # as a server's tasks for two sockets: contexts in which the cache was never used
    (django_1, ours_1), (django_2, ours_2) = await asyncio.gather(
        asyncio.create_task(used(), context=contextvars.Context()),
        asyncio.create_task(used(), context=contextvars.Context()))
    assert django_1 is not django_2, "each task gets its own (why the process-wide one is needed)"
    assert ours_1 is ours_2
    assert await limits.cache_call("add", f"test:{uuid.uuid4()}", 1, timeout=5)

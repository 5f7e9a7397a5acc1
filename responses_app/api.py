"""The Python API: start, read, stop and follow requests from any code of a host, sync or async.

    from responses_app import api

    request = api.submit(user, "Summarise this thread", model="gpt-4.1-mini")   # a WSGI view, the shell, a task
    api.view(request)                    # the latest committed view: {"revision", "meta", "blocks"}
    api.wait(request, timeout=60)        # the request again, once it ended (or TimeoutError)
    api.cancel(request)                  # the explicit Stop

    request = await api.asubmit(user, "Hello")                  # from async code
    async for update in api.subscribe(request): ...             # Update(kind, revision, status, view, ops)

    @api.tool(description="Look an order up.", parameters={...})    # a function tool the model may call
    def lookup_order(args): return {...}

Every submit goes through the one door (submission.py): the user's limits, the model allowlist,
validation and the output cap hold here as on every page. A request submitted from a process
without a runner (a WSGI worker, the shell, a task queue) reaches one within a second
(relay/worker.notify_start). `Refused` says why nothing was started (`.status`, `.code`,
`.message`, `.errors`, `.retry_after`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async

from . import selectors
from .models import Conversation, ResponseRequest
from .submission import Refused, Submitted, start, stop, stop_blocking
from .submission import submit as _submit
from .tools import tool
from .viewers.follow import Follow, Update

__all__ = ["Refused", "Update", "acancel", "asubmit", "aview", "await_request", "cancel", "submit", "subscribe",
           "tool", "view", "wait"]

WAIT_POLL_S = 0.25


def _data(input: Any, model: str | None, conversation: Conversation | Any | None, metadata: dict[str, str] | None,
          tools: list[str] | None, client_request_id: str | None, max_output_tokens: int | None) -> dict[str, Any]:
    data: dict[str, Any] = {"input": input, "model": model or _default_model(), "metadata": metadata or {}}
    if conversation is not None:
        data["conversation"] = str(getattr(conversation, "pk", conversation))
    if tools is not None:
        data["tools"] = tools
    if client_request_id is not None:
        data["client_request_id"] = client_request_id
    if max_output_tokens is not None:
        data["max_output_tokens"] = max_output_tokens
    return data


def _default_model() -> str:
    """The first allowed model; the simulator's plain scenario; else none (a 400 asks for one)."""
    from .conf import app_settings

    if app_settings.ALLOWED_MODELS:
        return str(app_settings.ALLOWED_MODELS[0])
    listed = [m for p in app_settings.PROVIDERS.values() for m in p.models]  # RELAY_PROVIDERS: the first
    if listed:
        return listed[0]
    return "sim-text" if app_settings.upstream_is_simulator else ""


def submit(user: Any, input: Any, *, model: str | None = None, conversation: Conversation | Any | None = None,
           metadata: dict[str, str] | None = None, tools: list[str] | None = None,
           client_request_id: str | None = None, max_output_tokens: int | None = None,
           trusted: bool = True) -> ResponseRequest:
    """Start a request (a new conversation unless `conversation` is given); returns at once, the
    answer streams in a runner. `tools`: the names of registered tools to offer (default all).
    `trusted`: the input is the host's own, so any input item goes (system and developer messages,
    tool outputs, item references, file ids); False for input a user wrote, which then meets the
    users' allowlist (input_items.py). Raises Refused."""
    done = _submit(user=user, data=_data(input, model, conversation, metadata, tools, client_request_id,
                                         max_output_tokens), trusted=trusted)
    if done.starts:
        from .relay.worker import notify_start

        notify_start(str(done.request.pk))
    if done.created:
        from .conversation_events import announce_turn_sync

        announce_turn_sync(done.request, branch=done.branch)
    return done.request


async def asubmit(user: Any, input: Any, *, model: str | None = None, conversation: Conversation | Any | None = None,
                  metadata: dict[str, str] | None = None, tools: list[str] | None = None,
                  client_request_id: str | None = None, max_output_tokens: int | None = None,
                  trusted: bool = True) -> ResponseRequest:
    done: Submitted = await sync_to_async(_submit)(user=user, data=_data(
        input, model, conversation, metadata, tools, client_request_id, max_output_tokens), trusted=trusted)
    await start(done)
    return done.request


def view(request: ResponseRequest | Any) -> dict[str, Any]:
    """The latest committed view (what a reconnecting tab sees first)."""
    return selectors.view_latest(request=_request(request))


async def aview(request: ResponseRequest | Any) -> dict[str, Any]:
    return await sync_to_async(view)(request)


def cancel(request: ResponseRequest | Any) -> bool:
    """The explicit Stop (submission.stop, as server code): True while a cancel is in effect (a
    request that already ended: False)."""
    return not stop_blocking(request=_request(request), trusted=True).ended


async def acancel(request: ResponseRequest | Any) -> bool:
    request = await sync_to_async(_request)(request)
    return not (await stop(request=request, trusted=True)).ended


def wait(request: ResponseRequest | Any, timeout: float | None = None) -> ResponseRequest:
    """Block until the request ended; the request as stored then. TimeoutError after `timeout` s."""
    request_id = str(getattr(request, "pk", request))
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        current = ResponseRequest.objects.get(pk=request_id)
        if current.status in ResponseRequest.ENDED:
            return current
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"request {request_id} still {current.status} after {timeout} s")
        time.sleep(WAIT_POLL_S)


async def await_request(request: ResponseRequest | Any, timeout: float | None = None) -> ResponseRequest:
    """`wait` for async code: follows the request's updates instead of polling."""
    request_id = getattr(request, "pk", request)

    async def until_ended() -> None:
        async with Follow(request_id) as follow:
            async for update in follow:
                if update.done:
                    return

    await asyncio.wait_for(until_ended(), timeout)
    return await sync_to_async(ResponseRequest.objects.get)(pk=request_id)


async def subscribe(request: ResponseRequest | Any) -> AsyncIterator[Update]:
    """Every update of the request's view: a snapshot first, then patches, then its terminal."""
    async with Follow(getattr(request, "pk", request)) as follow:
        async for update in follow:
            yield update


def _request(request: ResponseRequest | Any) -> ResponseRequest:
    if isinstance(request, ResponseRequest):
        return request
    return ResponseRequest.objects.get(pk=request)

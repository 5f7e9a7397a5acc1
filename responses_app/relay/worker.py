"""The runner as a Channels consumer that belongs to no websocket.

Submitting a request sends `relay.start` to the `relay-runner` channel. By default a Channels
`Worker` listens on that channel inside the web process itself (started on first use), so
`make run` needs one process and the in-memory layer. Scaled out, with Redis, set
RELAY_INPROCESS_RUNNER=false on web processes and run `manage.py runworker relay-runner`
processes: the same consumer, the same single-flight lease, anywhere.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any

from asgiref.sync import sync_to_async
from channels.consumer import AsyncConsumer
from channels.layers import get_channel_layer
from channels.routing import ChannelNameRouter
from channels.worker import Worker
from django.conf import settings

from ..services import requests_to_recover
from .hub import RUNNER_CHANNEL, get_hub
from .runner import StreamRunner

logger = logging.getLogger(__name__)


class RunnerConsumer(AsyncConsumer):
    """Starts runners; each runs as its own task, so one slow stream never blocks the next start."""

    async def relay_start(self, message: dict[str, Any]) -> None:
        request_id = str(message["request_id"])
        hub = get_hub()
        hub.spawn(request_id, lambda: StreamRunner(request_id, hub))

    async def relay_cancel(self, message: dict[str, Any]) -> None:
        runner = get_hub().runner(str(message["request_id"]))
        if runner is not None:
            runner.cancel()


runner_application = ChannelNameRouter({RUNNER_CHANNEL: RunnerConsumer.as_asgi()})


def ensure_worker() -> None:
    """Run the runner consumer on the `relay-runner` channel inside this process (default)."""
    if not settings.RELAY_INPROCESS_RUNNER:
        return
    hub = get_hub()
    if hub.worker_task is not None and not hub.worker_task.done():
        return
    layer = get_channel_layer()
    assert layer is not None
    worker = Worker(application=runner_application, channels=[RUNNER_CHANNEL], channel_layer=layer)
    # A clean context: the first caller may be inside async_to_sync, whose executor must not
    # be inherited by a worker that outlives that call.
    loop = asyncio.get_running_loop()
    hub.worker_task = loop.create_task(worker.arun(), name="relay-worker", context=contextvars.Context())
    recovery = loop.create_task(_recover(), name="relay-recovery", context=contextvars.Context())
    hub.tasks.add(recovery)
    recovery.add_done_callback(hub.tasks.discard)


async def _recover() -> None:
    """Restart what a previous process left behind: each runner resumes or reconciles."""
    layer = get_channel_layer()
    assert layer is not None
    for request_id in await sync_to_async(requests_to_recover)():
        await layer.send(RUNNER_CHANNEL, {"type": "relay.start", "request_id": str(request_id)})


async def start_request(request_id: str) -> None:
    """Ask a runner to start streaming a pending request (idempotent: single-flight in the DB)."""
    ensure_worker()
    layer = get_channel_layer()
    assert layer is not None
    await layer.send(RUNNER_CHANNEL, {"type": "relay.start", "request_id": request_id})


async def cancel_request(request_id: str) -> None:
    """Stop a running request: directly when its runner lives here, else through the channel."""
    hub = get_hub()
    runner = hub.runner(request_id)
    if runner is not None:
        runner.cancel()
        return
    layer = get_channel_layer()
    assert layer is not None
    await layer.send(RUNNER_CHANNEL, {"type": "relay.cancel", "request_id": request_id})

"""`RunnerConsumer`: a Channels consumer that belongs to no websocket. It listens on the
`relay-runner` channel (relay/worker.py serves it, in the web process or in `manage.py
relayworker`) and starts or stops the process's stream runners; each runner runs as its own task,
so one slow stream never blocks the next start.

It is dispatched directly (wsthreads.DirectDispatch): Channels' own dispatch first awaits
`aclose_old_connections()` on the process's one thread-sensitive thread, where page views and
other consumers' calls queue, and in a burst of connects a start could wait there past the
takeover sweep's patience. This consumer touches no database.
"""

from __future__ import annotations

from typing import Any

from channels.consumer import AsyncConsumer
from channels.routing import ChannelNameRouter

from ..wsthreads import DirectDispatch
from .hub import RUNNER_CHANNEL, get_hub
from .stream_runner import StreamRunner


class RunnerConsumer(DirectDispatch, AsyncConsumer):
    async def relay_start(self, message: dict[str, Any]) -> None:
        request_id = str(message["request_id"])
        hub = get_hub()
        hub.spawn(request_id, lambda: StreamRunner(request_id, hub))

    async def relay_cancel(self, message: dict[str, Any]) -> None:
        runner = get_hub().runner(str(message["request_id"]))
        if runner is not None:
            runner.cancel()


runner_application = ChannelNameRouter({RUNNER_CHANNEL: RunnerConsumer.as_asgi()})

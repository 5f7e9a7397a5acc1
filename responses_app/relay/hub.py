"""The per-process hub: the runners living in this process and the websocket viewers connected to it.

Fan-out has two paths. Viewers in the runner's own process get each patch straight into their
bounded outbox (measured for the relay issue: stock `group_send` through the in-memory layer
delivered 71% of messages at 150 streams and 7.5% at 500; direct sends delivered 100% at 500).
Viewers in other processes get it through the channel group `relay.<request id>`, which is only
used when the channel layer spans processes (Redis). Either path may drop a message; clients
notice by revision and ask for a snapshot, so a drop costs a refresh, never a hole.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

if TYPE_CHECKING:
    from ..upstream import Upstream
    from .runner import StreamRunner

logger = logging.getLogger(__name__)

RUNNER_CHANNEL = "relay-runner"
LEASE_POLL_S = 5.0  # how often the lease keeper looks for a Stop pressed in another process
LEASE_RENEW_S = 10.0  # leases last services.LEASE_SECONDS (30 s): renewed well before they run out


def group_name(request_id: uuid.UUID | str) -> str:
    return f"relay.{request_id}"


class Viewer(Protocol):
    def offer(self, message: dict[str, Any], text: str) -> None:
        """Queue a message without waiting; drop it when the viewer is too far behind."""


class Hub:
    def __init__(self) -> None:
        self.runners: dict[str, StreamRunner] = {}
        self.viewers: dict[str, set[Viewer]] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self._worker_task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._upstream: Upstream | None = None
        from .runner import db, db_writer
        from .writer import CheckpointWriter

        self.writer = CheckpointWriter(db_writer)
        self.leases = LeaseKeeper(db)
        self.pacer = Pacer(self)
        layer = get_channel_layer()
        self.fanout = bool(settings.RELAY_GROUP_FANOUT) and layer is not None and not isinstance(
            layer, InMemoryChannelLayer)

    # --- runners ------------------------------------------------------------------------------

    def spawn(self, request_id: str, factory: Callable[[], StreamRunner]) -> bool:
        """Start a runner unless this process already runs one for the request."""
        if request_id in self.runners:
            return False
        runner = factory()
        self.runners[request_id] = runner
        task = asyncio.get_running_loop().create_task(runner.run(), name=f"relay-runner-{request_id}")
        self.tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self.tasks.discard(t)
            if self.runners.get(request_id) is runner:
                del self.runners[request_id]
            if not t.cancelled() and t.exception() is not None:
                logger.error("runner for %s crashed", request_id, exc_info=t.exception())

        task.add_done_callback(done)
        return True

    def runner(self, request_id: str) -> StreamRunner | None:
        return self.runners.get(request_id)

    def upstream(self) -> Upstream:
        """The process's upstream client, shared by its runners (recreated if the base changes)."""
        from ..upstream import Upstream, base_url

        if self._upstream is None or self._upstream.base != base_url().rstrip("/"):
            self._upstream = Upstream()
        return self._upstream

    async def release_upstream(self, finishing: StreamRunner) -> None:
        """When the last runner here ends, release the pooled connections (reopened on demand)."""
        if self._upstream is None or any(r is not finishing for r in self.runners.values()):
            return
        upstream, self._upstream = self._upstream, None
        await upstream.aclose()

    # --- viewers ------------------------------------------------------------------------------

    def attach(self, request_id: str, viewer: Viewer) -> None:
        self.viewers.setdefault(request_id, set()).add(viewer)

    def detach(self, request_id: str, viewer: Viewer) -> None:
        viewers = self.viewers.get(request_id)
        if viewers is not None:
            viewers.discard(viewer)
            if not viewers:
                del self.viewers[request_id]

    def publish(self, request_id: str, message: dict[str, Any], text: str) -> None:
        """Deliver to local viewers now; to other processes' viewers through the group."""
        for viewer in tuple(self.viewers.get(request_id, ())):
            viewer.offer(message, text)
        if self.fanout:
            task = asyncio.get_running_loop().create_task(self._group_send(request_id, text))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _group_send(self, request_id: str, text: str) -> None:
        layer = get_channel_layer()
        assert layer is not None
        try:
            await layer.group_send(group_name(request_id), {"type": "relay.message", "text": text})
        except Exception:  # best effort: clients resync by revision
            logger.warning("group_send failed for %s", request_id, exc_info=True)

    # --- the in-process worker -------------------------------------------------------------

    def ensure_worker(self) -> None:
        """Run the runner consumer on the `relay-runner` channel inside this process (default)."""
        if not settings.RELAY_INPROCESS_RUNNER:
            return
        loop = asyncio.get_running_loop()
        if self._worker_task is not None and not self._worker_task.done() and self._loop is loop:
            return
        from channels.worker import Worker

        from .worker import runner_application

        layer = get_channel_layer()
        assert layer is not None
        worker = Worker(application=runner_application, channels=[RUNNER_CHANNEL], channel_layer=layer)
        self._loop = loop
        # A clean context: the first caller may be inside async_to_sync, whose executor must not
        # be inherited by a worker that outlives that call.
        self._worker_task = loop.create_task(worker.arun(), name="relay-worker", context=contextvars.Context())
        recovery = loop.create_task(self._recover(), name="relay-recovery", context=contextvars.Context())
        self.tasks.add(recovery)
        recovery.add_done_callback(self.tasks.discard)

    async def _recover(self) -> None:
        """Restart what a previous process left behind: each runner resumes or reconciles."""
        from asgiref.sync import sync_to_async

        from ..services import requests_to_recover

        layer = get_channel_layer()
        assert layer is not None
        for request_id in await sync_to_async(requests_to_recover)():
            await layer.send(RUNNER_CHANNEL, {"type": "relay.start", "request_id": str(request_id)})


class Pacer:
    """Stretches every runner's flush interval while the event loop falls behind.

    Each patch costs the same to send whatever it holds, so when the process is short of CPU,
    fewer and larger patches keep every stream flowing where one patch per 50 ms would fall
    further behind. The loop's lag is sampled every 100 ms: over 20 ms the scale grows by half,
    up to 4x (200 ms at the default interval); under 5 ms it shrinks back towards 1."""

    PERIOD = 0.1
    MAX_SCALE = 4.0

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.scale = 1.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="relay-pacer", context=contextvars.Context())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self.hub.leases.runners:
            started = loop.time()
            await asyncio.sleep(self.PERIOD)
            lag = loop.time() - started - self.PERIOD
            if lag > 0.02:
                self.scale = min(self.scale * 1.5, self.MAX_SCALE)
            elif lag < 0.005:
                self.scale = max(1.0, self.scale / 1.25)
        self.scale = 1.0


class LeaseKeeper:
    """Keeps the leases of every runner in the process, in one statement per round.

    Measured at 100 streams: each runner renewing its own lease and polling for a Stop took 10%
    of the process's samples, in ORM calls holding the GIL. Here a round costs the same for one
    runner or a thousand: one read (Stop pressed elsewhere?) every 5 s, one UPDATE every 10 s."""

    def __init__(self, run_db: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        self._db = run_db
        self.runners: set[StreamRunner] = set()
        self._task: asyncio.Task[None] | None = None

    def add(self, runner: StreamRunner) -> None:
        self.runners.add(runner)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="relay-lease-keeper", context=contextvars.Context())

    def discard(self, runner: StreamRunner) -> None:
        self.runners.discard(runner)

    async def _run(self) -> None:
        from ..services import leases_renew

        loop = asyncio.get_running_loop()
        renewed = loop.time()
        while self.runners:
            await asyncio.sleep(LEASE_POLL_S)
            now = loop.time()
            runners = list(self.runners)
            for runner in runners:
                runner.check_idle(now)
            renew = now - renewed >= LEASE_RENEW_S - LEASE_POLL_S / 2
            try:
                cancelled = await self._db(leases_renew)(
                    leases=[(runner.uuid, runner.token) for runner in runners], renew=renew)
            except Exception:  # the next round tries again; a lease lasts three renewals
                logger.warning("lease round for %d runners failed", len(runners), exc_info=True)
                continue
            if renew:
                renewed = now
                for runner in runners:
                    runner.writes += 1
            for runner in runners:
                if runner.uuid in cancelled and not runner.cancel_requested.is_set():
                    runner.cancel()  # Stop pressed in a process that does not run this request


_hubs: dict[int, Hub] = {}


def get_hub() -> Hub:
    """One hub per event loop (tests run several loops in one process)."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(id(loop))
    if hub is None or hub._loop not in (None, loop):
        hub = _hubs[id(loop)] = Hub()
    return hub

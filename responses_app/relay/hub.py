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
import logging
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

from ..upstream import Upstream, base_url
from .dbthreads import db, db_writer
from .keepers import LeaseKeeper, Pacer
from .protocols import Runner, Viewer
from .writer import CheckpointWriter

logger = logging.getLogger(__name__)

RUNNER_CHANNEL = "relay-runner"
RECENT_PATCHES = 256  # per request with viewers here: more than a checkpoint interval of patches


def group_name(request_id: uuid.UUID | str) -> str:
    return f"relay.{request_id}"


class Hub:
    def __init__(self) -> None:
        self.runners: dict[str, Runner] = {}
        self.viewers: dict[str, set[Viewer]] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.loop = asyncio.get_running_loop()
        self.worker_task: asyncio.Task[Any] | None = None  # the in-process runner worker (worker.py)
        self.counters = {"takeovers": 0, "lease_expiries": 0}
        self._recent: dict[str, deque[dict[str, Any]]] = {}
        self._upstream: Upstream | None = None
        self.writer = CheckpointWriter(db_writer)
        self.leases = LeaseKeeper(db)
        self.pacer = Pacer(self.leases)
        layer = get_channel_layer()
        self.fanout = bool(settings.RELAY_GROUP_FANOUT) and layer is not None and not isinstance(
            layer, InMemoryChannelLayer)

    # --- runners ------------------------------------------------------------------------------

    def spawn(self, request_id: str, factory: Callable[[], Runner]) -> bool:
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

    def runner(self, request_id: str) -> Runner | None:
        return self.runners.get(request_id)

    def upstream(self) -> Upstream:
        """The process's upstream client, shared by its runners (recreated if the base changes)."""
        if self._upstream is None or self._upstream.base != base_url().rstrip("/"):
            self._upstream = Upstream()
        return self._upstream

    async def release_upstream(self, finishing: Runner) -> None:
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
                self._recent.pop(request_id, None)

    def remember(self, request_id: str, patch: dict[str, Any]) -> None:
        """A patch heard from a runner in another process, once for all its viewers here: a
        viewer that starts from the latest checkpoint chains these to be current at once."""
        recent = self._recent.get(request_id)
        if recent is None:
            recent = self._recent[request_id] = deque(maxlen=RECENT_PATCHES)
        if not recent or patch["revision"] > recent[-1]["revision"]:
            recent.append(patch)

    def recent_patches(self, request_id: str) -> list[dict[str, Any]]:
        return list(self._recent.get(request_id, ()))

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


_hubs: dict[int, Hub] = {}


def get_hub() -> Hub:
    """One hub per event loop (tests run several loops in one process)."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(id(loop))
    if hub is None or hub.loop is not loop:
        hub = _hubs[id(loop)] = Hub()
    return hub

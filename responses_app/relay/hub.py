"""The per-process hub: the runners living in this process and the websocket viewers connected to it.

Fan-out has two paths. Viewers in the runner's own process get each patch straight into their
bounded outbox: stock `group_send` through the in-memory layer lost messages under load where
direct sends lost none (bench/README.md, relay).
Viewers in other processes get it through fanout.py (one inbox per process, batches per request),
only when the channel layer spans processes (Redis). Either path may drop a message; the consumer
notices by revision and resyncs its viewer, so a drop costs a refresh, never a hole.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from channels.layers import InMemoryChannelLayer, get_channel_layer

from ..conf import app_settings
from ..ops import metrics
from ..streaming.wire import decode
from ..upstream.http import Upstream
from ..upstream.websocket import make_upstream, matches_settings
from .checkpoint_writer import CheckpointWriter
from .dbthreads import db, db_writer
from .deadlines import Deadlines
from .fanout import Fanout
from .keepers import LeaseKeeper, Pacer
from .protocols import Runner, Viewer

logger = logging.getLogger(__name__)

RUNNER_CHANNEL = "relay-runner"
RECENT_PATCHES = 256  # per request with viewers here: more than a checkpoint interval of patches


class Hub:
    def __init__(self) -> None:
        self.runners: dict[str, Runner] = {}
        self.viewers: dict[str, set[Viewer]] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.loop = asyncio.get_running_loop()
        self.worker_task: asyncio.Task[Any] | None = None  # the in-process runner worker (worker.py)
        self.counters = {"takeovers": 0, "lease_expiries": 0}
        self._recent: dict[str, deque[dict[str, Any]]] = {}
        self._upstreams: dict[str, Upstream] = {}  # by provider name ("": the implicit one)
        self.writer = CheckpointWriter(db_writer, gather_s=app_settings.CHECKPOINT_GATHER_MS / 1000)
        self.leases = LeaseKeeper(db)
        self.pacer = Pacer(self.leases)
        self.deadlines = Deadlines(self.loop)  # every delivery's next deadline, on one timer
        layer = get_channel_layer()
        spans_processes = layer is not None and not isinstance(layer, InMemoryChannelLayer)
        self._views: dict[str, tuple[dict[str, Any], str]] = {}  # per request with viewers here: a live view sent
        self.fanout = Fanout(layer, self.deliver, self._commit_asked, self._live_view, self._view_arrived,
                             self._missed) if app_settings.GROUP_FANOUT and spans_processes else None

    # --- runners ------------------------------------------------------------------------------

    def spawn(self, request_id: str, factory: Callable[[], Runner]) -> bool:
        """Start a runner unless this process already runs one for the request."""
        if request_id in self.runners:
            return False
        runner = factory()
        self.runners[request_id] = runner
        task = asyncio.get_running_loop().create_task(runner.run(), name=f"relay-runner-{request_id}")
        self.tasks.add(task)
        if self.fanout is not None:  # asked for its live view by the processes its tabs move to
            self._background(self.fanout.serve_asks(request_id))

        def done(t: asyncio.Task[Any]) -> None:
            self.tasks.discard(t)
            if self.runners.get(request_id) is runner:
                del self.runners[request_id]
                if self.fanout is not None:
                    self._background(self.fanout.stop_asks(request_id))
            if not t.cancelled() and t.exception() is not None:
                logger.error("runner for %s crashed", request_id, exc_info=t.exception())

        task.add_done_callback(done)
        return True

    def _background(self, work: Coroutine[Any, Any, Any]) -> None:
        task = self.loop.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def runner(self, request_id: str) -> Runner | None:
        return self.runners.get(request_id)

    def upstream(self, provider: str = "") -> Upstream:
        """The process's client of one provider, shared by its runners (recreated if the provider's
        settings change). Raises LookupError for a provider no longer configured."""
        current = self._upstreams.get(provider)
        spec = app_settings.provider(provider) if provider else None
        if provider and spec is None:
            raise LookupError(f"the provider {provider!r} that served this request is no longer configured "
                              "(RELAY_PROVIDERS)")
        if current is None or not matches_settings(current, spec):
            if current is not None and current.persistent:
                self._background(current.aclose())
            current = self._upstreams[provider] = make_upstream(spec)
        return current

    @property
    def _upstream(self) -> Upstream | None:
        """The implicit provider's client (the single-upstream settings'), as tests reach it."""
        return self._upstreams.get("")

    @_upstream.setter
    def _upstream(self, upstream: Upstream | None) -> None:
        if upstream is None:
            self._upstreams.pop("", None)
        else:
            self._upstreams[""] = upstream

    async def release_upstream(self, finishing: Runner) -> None:
        """When the last runner here ends, release the pooled connections (reopened on demand);
        WebSocket mode's connection stays for the next request (it rotates by age)."""
        if any(r is not finishing for r in self.runners.values()):
            return
        for name, upstream in list(self._upstreams.items()):
            if not upstream.persistent and self._upstreams.get(name) is upstream:
                del self._upstreams[name]
                await upstream.aclose()

    # --- viewers ------------------------------------------------------------------------------

    async def attach(self, request_id: str, viewer: Viewer) -> None:
        viewers = self.viewers.setdefault(request_id, set())
        if viewer not in viewers:
            metrics.VIEWERS.inc()
        viewers.add(viewer)
        if self.fanout is not None and len(viewers) == 1:
            await self.fanout.join(request_id)  # before any read: nothing published from now on is missed

    def detach(self, request_id: str, viewer: Viewer) -> None:
        viewers = self.viewers.get(request_id)
        if viewers is not None:
            if viewer in viewers:
                metrics.VIEWERS.dec()
            viewers.discard(viewer)
            if not viewers:
                del self.viewers[request_id]
                self._recent.pop(request_id, None)
                self._views.pop(request_id, None)
                if self.fanout is not None:
                    self._background(self.fanout.leave(request_id))

    def _commit_asked(self, request_id: str) -> None:
        """Another process asked (Fanout.ask_commit): the request's runner here commits now."""
        runner = self.runners.get(request_id)
        if runner is not None:
            runner.commit_asked()

    async def _live_view(self, request_id: str) -> str | None:
        """Another process asked (Fanout.ask_commit): the live view of the request's runner here,
        as it goes on the wire; None when it does not run here."""
        runner = self.runners.get(request_id)
        if runner is None:
            return None
        view, status = await runner.live_view()
        return orjson.dumps({"revision": view["revision"], "status": status, "view": view}).decode()

    def _view_arrived(self, request_id: str, text: str) -> None:
        """The live view of a request that runs elsewhere, as its runner sent it when asked: kept
        while the request has viewers here (`sent_view`), and the viewers that wait to catch up
        take it now."""
        try:
            message = orjson.loads(text)
            view, status = message["view"], str(message["status"])
            newer = int(view["revision"]) > self._views.get(request_id, ({"revision": -1}, ""))[0]["revision"]
        except (ValueError, KeyError, TypeError):
            logger.warning("a malformed view of %s was sent here; ignored", request_id)
            return
        if newer and request_id in self.viewers:
            self._views[request_id] = (view, status)
            for viewer in tuple(self.viewers[request_id]):
                viewer.hurry(view["revision"])

    def _missed(self, request_ids: list[str]) -> None:
        """Messages of these requests were lost on their way here (Fanout counts them): their
        viewers resync now, so one whose `terminal` was among them ends at once."""
        for request_id in request_ids:
            for viewer in tuple(self.viewers.get(request_id, ())):
                viewer.missed()

    def sent_view(self, request_id: str) -> tuple[dict[str, Any], str] | None:
        """The newest live view its runner elsewhere sent here (read it, do not change it)."""
        return self._views.get(request_id)

    def ask_commit(self, request_id: str) -> None:
        """A viewer here holds, or this process heard, a newer view than the committed one and this
        process does not run the request: its runner, wherever it is, commits now and sends its
        live view here (no-op with one process). Never waits."""
        if self.fanout is not None and request_id not in self.runners:
            self._background(self.fanout.ask_commit(request_id))

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

    def heard_revision(self, request_id: str) -> int:
        """The newest revision heard here from the request's runner in another process (-1: none)."""
        recent = self._recent.get(request_id)
        return recent[-1]["revision"] if recent else -1

    def publish(self, request_id: str, message: dict[str, Any], text: str) -> None:
        """Deliver to local viewers now; to other processes' viewers through the fan-out."""
        for viewer in tuple(self.viewers.get(request_id, ())):
            viewer.offer(message, text)
        if self.fanout is not None:
            self.fanout.publish(request_id, text, message.get(metrics.ARRIVED))

    def deliver(self, request_id: str, texts: list[str], arrived: tuple[int, float] | None = None) -> None:
        """Messages from a runner in another process, to this process's viewers, in order;
        `arrived`: one patch's index in `texts` and its upstream arrival (for the patch lag)."""
        viewers = tuple(self.viewers.get(request_id, ()))
        for index, text in enumerate(texts):
            message = decode(text)  # a patch arrives in the wire's form
            if arrived is not None and index == arrived[0]:
                message[metrics.ARRIVED] = arrived[1]
            if message["type"] == "patch":
                self.remember(request_id, message)
            for viewer in viewers:
                viewer.offer(message, text)


_hubs: dict[int, Hub] = {}


def get_hub() -> Hub:
    """One hub per event loop (tests run several loops in one process)."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(id(loop))
    if hub is None or hub.loop is not loop:
        hub = _hubs[id(loop)] = Hub()
    return hub

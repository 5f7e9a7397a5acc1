"""Where runners run: the runner consumer (relay/runner_channel.py), kept alive by a supervisor.

Submitting a request sends `relay.start` to the `relay-runner` channel. By default a Channels
`Worker` listens on that channel inside the web process itself (started on first use), so
`make run` needs one process and the in-memory layer. Scaled out, with Redis, set
RELAY_INPROCESS_RUNNER=false on web processes and run `manage.py relayworker` processes: the same
consumer, the same single-flight lease, anywhere.

A request submitted where no runner lives (a WSGI view, the shell, a task queue) is announced by
`notify_start`, and a runner takes it within a second: through the channel layer when it spans
processes (Redis), else PostgreSQL's NOTIFY (every runner process LISTENs), else (SQLite with the
in-memory layer, one machine) a watch of the newest pending rows every WATCH_S. The in-process
runner starts with the first request an ASGI process serves (Django's `request_started`), or its
first stream or websocket; `relayworker` at once.

Every runner process, in-process or not, is supervised (`serve`):
- it sweeps for expired leases at start and every SWEEP_S seconds, or as the earliest lease runs
  out when that comes sooner, and takes each one over (the runner rebuilds from the event log and
  resumes or reconciles; it never re-POSTs): a stream whose runner died flows again within the
  lease (services.LEASE_SECONDS) and a moment, not a whole sweep later;
- a channel-layer failure (Redis restarting) restarts the Worker with backoff instead of ending
  the process; runners already streaming are tasks of their own and go on meanwhile;
- stopping it (SIGTERM: the relayworker command, project/serve.py) hands its streams over
  (`hand_off`): released at once and announced, not left to lease expiry and a sweep.

May import: the runner and its consumer (nothing imports this module back but the websocket
consumers, views and the command).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer
from channels.worker import Worker
from django.core.handlers.asgi import ASGIHandler
from django.db import connection
from django.utils import timezone

from .. import selectors
from ..conf import app_settings
from ..ops import logcontext
from .backoff import Backoff
from .hub import RUNNER_CHANNEL, Hub, get_hub
from .runner_channel import runner_application
from .stream_runner import StreamRunner

logger = logging.getLogger(__name__)

SWEEP_S = 3.0  # how often each runner process looks for expired leases, at least
SWEEP_AFTER_EXPIRY_S = 0.05  # a sweep due at a lease's end comes this long after it
SWEEP_SOONEST_S = 0.1  # ... and never sooner: a lease ending as it is read does not make the loop spin
WATCH_S = 0.5  # SQLite with the in-memory layer: how often a runner process looks for new pending requests
WATCH_WINDOW_S = 60  # ... among those created this recently (older ones are the sweep's)
NOTIFY_START = "relay_start"  # PostgreSQL notification channels
NOTIFY_CANCEL = "relay_cancel"
HANDOFF_WAIT_S = 5.0  # a stopping process: how long its runners get to commit and let go
# ... and how fast they let go: HANDOFF_PER_S a second, at most HANDOFF_SPREAD_S for all. The process
# that takes them over then starts each as it comes, not all at once, and those not let go yet flow
# here meanwhile.
HANDOFF_PER_S = 25.0
HANDOFF_SPREAD_S = 2.0
BUSY_GRACE_S = 5.0  # ... and one busy ending (a tool round, its outcome) to end before it is handed off


class _Worker(Worker):
    """Channels' Worker, except that cancelling it stops its listeners and application instances:
    Channels' own leaves them running, and a stopping process went on taking requests (the
    announcement of its own hand-off among them)."""

    async def handle(self) -> None:
        listeners = [asyncio.ensure_future(self.listener(channel)) for channel in self.channels]
        try:
            await asyncio.wait(listeners)
        finally:
            for task in [*listeners, *(details["future"] for details in self.application_instances.values())]:
                task.cancel()
        for listener in listeners:
            listener.result()  # a listener's error (the channel layer's): `serve` restarts the Worker


async def serve() -> None:
    """Run the runner consumer and the takeover sweep until cancelled, surviving layer blips."""
    loop = asyncio.get_running_loop()
    sweeper = loop.create_task(_sweep_forever(), name="relay-sweeper")
    listener = loop.create_task(_listen_forever(), name="relay-listener")
    backoff = Backoff()
    try:
        while True:
            layer = get_channel_layer()
            assert layer is not None
            worker = _Worker(application=runner_application, channels=[RUNNER_CHANNEL], channel_layer=layer)
            try:
                await worker.arun()
                backoff.reset()
            except asyncio.CancelledError:
                raise
            except Exception:
                await backoff.wait(logger, "relay worker lost its channel layer")
    finally:
        sweeper.cancel()
        listener.cancel()


async def _sweep_forever() -> None:
    while True:
        wait = SWEEP_S
        try:
            swept_at = timezone.now()
            await sweep()
            wait = await next_sweep_in(since=swept_at)
        except asyncio.CancelledError:
            raise
        except Exception:  # the database or the layer is away: the next sweep tries again
            logger.warning("takeover sweep failed", exc_info=True)
        await asyncio.sleep(wait)


async def next_sweep_in(*, since: datetime | None = None) -> float:
    """Seconds to the next sweep: SWEEP_S, or just after the earliest lease runs out when that is
    sooner. A live runner renews its lease long before (keepers.LEASE_RENEW_S), so a lease that
    nears its end is most often a dead runner's: it is taken over as it ends, not up to a sweep
    later (a kill -9's pause was the lease plus up to SWEEP_S). A lease that ran out after `since`
    (the last sweep's start, which did not see it expired) makes the next sweep due at once."""
    expiry = await database_sync_to_async(selectors.next_lease_expiry)(now=since)
    if expiry is None:
        return SWEEP_S
    due = (expiry - timezone.now()).total_seconds() + SWEEP_AFTER_EXPIRY_S
    return min(SWEEP_S, max(SWEEP_SOONEST_S, due))


async def sweep() -> int:
    """Take over what died: streaming requests whose lease ran out, pending ones nobody started.
    Single-flight holds: each is started through the channel, and only one runner wins its lease."""
    # Stale connections of this thread are closed around the query (the runner consumer's
    # dispatch no longer does it): after a database restart the next sweep reconnects.
    stale = await database_sync_to_async(selectors.requests_to_take_over)()
    if not stale:
        return 0
    hub = get_hub()
    layer = get_channel_layer()
    assert layer is not None
    for request_id, status, expired in stale:
        if str(request_id) in hub.runners:
            continue  # its runner lives here and is only late renewing
        with logcontext.about(request_id):
            if status == "streaming":
                logger.warning("lease of request %s expired at %s: taking it over", request_id, expired)
                hub.counters["lease_expiries"] += 1
            else:
                logger.warning("request %s was never started: starting it", request_id)
        hub.counters["takeovers"] += 1
        await layer.send(RUNNER_CHANNEL, {"type": "relay.start", "request_id": str(request_id)})
    return len(stale)


async def hand_off() -> int:
    """The process is stopping, and takes nothing new (`serve` was cancelled first): each runner
    here stops reading, commits what it applied and releases its lease, and the other runner
    processes are told at once (as a submitted request is: the channel layer, else NOTIFY), so one
    of them resumes each stream within a second, after its last applied sequence number. They let
    go HANDOFF_PER_S a second (above). A runner busy otherwise (a tool round, writing its outcome)
    gets BUSY_GRACE_S to end first. With no other runner process alive, the next one to start takes
    the released leases over at once (its first sweep). The number of streams handed over."""
    hub = get_hub()
    started = hub.loop.time()
    # The layer's connections are closed first: a receive cancelled with `serve` can leave its
    # blocking pop waiting in Redis, and that pop would take an announcement and lose it. Not
    # under a batch being sent: closed under it, that batch (a stream's last patches) was lost.
    if (close_pools := getattr(get_channel_layer(), "close_pools", None)) is not None:
        with contextlib.suppress(Exception):
            async with hub.fanout.paused() if hub.fanout is not None else contextlib.nullcontext():
                await close_pools()
    handed: list[str] = []
    announcing: list[asyncio.Future[None]] = []
    runners = list(hub.runners.items())
    rate = max(HANDOFF_PER_S, len(runners) / HANDOFF_SPREAD_S)
    for i, (request_id, each) in enumerate(runners):
        if (delay := started + i / rate - hub.loop.time()) > 0:
            await asyncio.sleep(delay)
        if hub.runners.get(request_id) is each and each.hand_off():
            handed.append(request_id)
            announcing.append(asyncio.ensure_future(_announce_when_done(hub, request_id)))
    busy = [request_id for request_id in hub.runners if request_id not in frozenset(handed)]
    announced = asyncio.gather(*announcing)
    if busy and (tasks := _tasks_of(hub, busy)):
        await asyncio.wait(tasks, timeout=BUSY_GRACE_S)
        late = [request_id for request_id in busy
                if (runner := hub.runners.get(request_id)) is not None and runner.hand_off(now=True)]
        await asyncio.gather(*(_announce_when_done(hub, request_id) for request_id in late))
        handed += late
    await announced
    logger.info("handed over %d stream(s) in %.2fs", len(handed), hub.loop.time() - started)
    return len(handed)


async def stop_serving() -> int:
    """This process serves runners in-process and is stopping (project/serve.py, on SIGTERM): it
    takes nothing new and hands its streams over (`hand_off`). 0 when no runner is served here."""
    hub = get_hub()
    if hub.worker_task is None:
        return 0
    hub.worker_task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await hub.worker_task
    return await hand_off()


def _tasks_of(hub: Hub, request_ids: list[str]) -> set[asyncio.Task[Any]]:
    names = {f"relay-runner-{request_id}" for request_id in request_ids}
    return {task for task in hub.tasks if task.get_name() in names}


async def _announce_when_done(hub: Hub, request_id: str) -> None:
    """Once the runner let the request go, a runner elsewhere takes it now. One still waiting for
    the upstream to confirm its request (`hand_off`) after HANDOFF_WAIT_S stops all the same."""
    if tasks := _tasks_of(hub, [request_id]):
        _, running = await asyncio.wait(tasks, timeout=HANDOFF_WAIT_S)
        if running and (runner := hub.runners.get(request_id)) is not None and runner.hand_off(now=True):
            await asyncio.wait(running, timeout=HANDOFF_WAIT_S)
    try:
        if hub.fanout is not None:
            await hub.fanout.drain()
        if layer_spans_processes():
            layer = get_channel_layer()
            assert layer is not None
            await layer.send(RUNNER_CHANNEL, {"type": "relay.start", "request_id": request_id})
        elif connection.vendor == "postgresql":
            await database_sync_to_async(_notify)("relay.start", NOTIFY_START, request_id)
        # else (SQLite, the in-memory layer): the others' next sweep (SWEEP_S) finds the lease released
    except Exception:  # the lease is released: a sweep takes it over all the same
        logger.warning("could not announce the hand-off of %s", request_id, exc_info=True)


def ensure_worker() -> None:
    """Serve the runner consumer inside this process (the default: RELAY_INPROCESS_RUNNER)."""
    if not app_settings.INPROCESS_RUNNER:
        return
    hub = get_hub()
    if hub.worker_task is not None and not hub.worker_task.done():
        return
    # A clean context: the first caller may be inside async_to_sync, whose executor must not
    # be inherited by a worker that outlives that call.
    hub.worker_task = asyncio.get_running_loop().create_task(serve(), name="relay-worker",
                                                            context=contextvars.Context())


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


# --- starts from any process ----------------------------------------------------------------------

def layer_spans_processes() -> bool:
    """Whether the channel layer reaches other processes (Redis), not this one's memory only."""
    layer = get_channel_layer()
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


def notify_start(request_id: str) -> None:
    """Sync code in any process: a runner wherever one runs takes this pending request now."""
    _notify("relay.start", NOTIFY_START, request_id)


def notify_cancel(request_id: str) -> None:
    """Sync code in any process: the Stop reaches the request's runner now (on SQLite with the
    in-memory layer, at its next lease renewal: the cancel is already in the database)."""
    _notify("relay.cancel", NOTIFY_CANCEL, request_id)


def _notify(message_type: str, pg_channel: str, request_id: str) -> None:
    if layer_spans_processes():
        layer = get_channel_layer()
        assert layer is not None
        async_to_sync(layer.send)(RUNNER_CHANNEL, {"type": message_type, "request_id": request_id})
    elif connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [pg_channel, request_id])
    # else: SQLite and the in-memory layer: the runners' watch of pending rows (WATCH_S) finds it


async def _listen_forever() -> None:
    """Take what `notify_start`/`notify_cancel` announce, unless the channel layer carries it."""
    if layer_spans_processes():
        return
    if connection.vendor == "postgresql":
        await _listen_postgresql()
    else:
        await _watch_pending()


async def _listen_postgresql() -> None:
    import psycopg
    from django.db import connections

    backoff = Backoff()
    while True:
        try:
            params = connections["default"].get_connection_params()
            params.pop("cursor_factory", None)
            params.pop("context", None)
            async with await psycopg.AsyncConnection.connect(**params, autocommit=True) as conn:
                await conn.execute(f"LISTEN {NOTIFY_START}")
                await conn.execute(f"LISTEN {NOTIFY_CANCEL}")
                backoff.reset()
                async for notice in conn.notifies():
                    if notice.channel == NOTIFY_START:
                        get_hub().spawn(notice.payload, _runner_factory(notice.payload))
                    else:
                        await cancel_request(notice.payload)
        except asyncio.CancelledError:
            raise
        except Exception:
            await backoff.wait(logger, "listening for relay starts failed")


async def _watch_pending() -> None:
    while True:
        try:
            for request_id in await database_sync_to_async(selectors.requests_pending_recent)(
                    within_s=WATCH_WINDOW_S):
                get_hub().spawn(str(request_id), _runner_factory(str(request_id)))
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("the watch for pending requests failed", exc_info=True)
        await asyncio.sleep(WATCH_S)


def _runner_factory(request_id: str) -> Any:
    hub = get_hub()
    return lambda: StreamRunner(request_id, hub)


async def start_with_the_first_request(sender: Any, **kwargs: Any) -> None:
    """Async, so Django's ASGI handler awaits it on the server's loop; WSGI handlers (and the test
    client's) are left alone: no runner lives in those processes."""
    if isinstance(sender, type) and issubclass(sender, ASGIHandler):
        ensure_worker()

"""Fan-out between processes, through the channel layer (Redis), in few and large messages.

Why: with one `group_send` per patch to one channel per viewer, each web process received a
message per viewer per patch (one at a time, three Redis round trips each), and the lag across
processes grew to seconds with every process mostly idle (bench/README.md, scaled). Here:

- a process joins a request's group once, with one inbox channel of its own, while it has viewers
  of that request; the hub hands what arrives to each local viewer (`Hub.deliver`);
- a process that runs streams batches what it publishes per request and, every REMOTE_FLUSH_S,
  sends each other process one message with the batches of every request it follows (a patch, a
  heartbeat, a terminal: in order per request), from one sending task. On Redis it reads the
  groups' members itself, in one pipelined round trip (`_RedisDirectory`), since a `group_send`
  per request made each process receive a message per request per interval: at 100 streams that
  was a third of a web process's CPU and of a worker's (bench/README.md, chaos). Other layers get
  a `group_send` per request, of the same message;
- a message can be lost on the way (seen about once in 7 minutes at 100 streams; likely
  channels_redis dropping one that a cancelled receive, a closing socket's, had popped from
  Redis), so on Redis each carries its number in the sequence from that sender to that process
  and the requests of the one before, and every message is followed by another within
  REMOTE_FLUSH_S (an empty one if need be): a process that sees a number skipped resyncs the
  viewers of the requests it may have held (`missed`) at once. Until then, a request whose last
  patches and `terminal` were lost waited SILENCE_S (20 s);
- a process whose viewer holds a newer view than the committed one (a tab moved there by a
  restart, which this process was not following) asks the process that runs the request to
  commit a checkpoint now (`ask_commit`), instead of waiting for the next interval's, and to send
  it the live view at once (`relay.view`, to the asking process's inbox): its viewers catch up
  from that without waiting for the database. The ask goes to the request's ask group, which
  only the process running the request joins (`serve_asks`, while its runner runs), so it needs
  no batch heard first: a tab's first batch may be a stream's pause away;
- the inbox reader survives the layer going away (Redis restarting): it backs off, reconnects and
  joins its groups again (a restarted Redis has forgotten them). Meanwhile viewers converge by
  heartbeats and resyncs (see viewers/cursor.py), and nothing here ever blocks a runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer

from ..ops.metrics import FANOUT_LOST
from .backoff import Backoff

logger = logging.getLogger(__name__)

REMOTE_FLUSH_S = 0.1  # what other processes' viewers wait at most, on top of the flush interval
JOIN_TIMEOUT_S = 3.0
ASK_EVERY_S = 0.5  # a process asks a request's runner to commit at most this often
REJOIN_S = 10.0  # memberships renewed this often: a Redis that restarted unnoticed forgot them
MAX_SENDERS = 256  # the senders whose message numbers a process keeps (each restart is a new one)


def group_name(request_id: str) -> str:
    return f"relay.{request_id}"


def ask_group(request_id: str) -> str:
    return f"relay.ask.{request_id}"


class Fanout:
    def __init__(self, layer: BaseChannelLayer,
                 deliver: Callable[[str, list[str], tuple[int, float] | None], None],
                 commit_asked: Callable[[str], None] | None = None,
                 live_view: Callable[[str], Awaitable[str | None]] | None = None,
                 view_arrived: Callable[[str, str], None] | None = None,
                 missed: Callable[[list[str]], None] | None = None) -> None:
        self.layer = layer
        self._directory = _RedisDirectory.of(layer)
        self._deliver = deliver  # (request id, texts) -> the local viewers
        self._commit_asked = commit_asked  # (request id) -> its runner here commits now
        self._live_view = live_view  # (request id) -> its runner's view here, as wire text (None: not here)
        self._view_arrived = view_arrived  # (request id, that text) -> what this process's viewers catch up from
        self._missed = missed  # (request ids) -> their viewers here resync: messages of theirs were lost
        self._numbers: dict[str, int] = {}  # per inbox sent to: the last message's number
        self._before: dict[str, list[str]] = {}  # per inbox sent to: the requests of the last message
        self._trailing: set[str] = set()  # the inboxes sent to in the last round, which hear once more
        self._heard: dict[str, int] = {}  # per sender heard from: its last message's number
        self._origins: dict[str, str] = {}  # per request followed here: the sender last heard for it
        self.inbox: str | None = None
        self._asked_at: dict[str, float] = {}
        self.serving: set[str] = set()  # the requests whose ask group this process is in (its runners')
        self.joined: set[str] = set()
        self._outgoing: dict[str, list[str]] = {}
        self._arrived: dict[str, tuple[int, float]] = {}  # per request, its latest stamped patch (metrics)
        self._sender: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._replies: set[asyncio.Task[None]] = set()
        self._sending = asyncio.Lock()  # held while a round is sent (`paused`)
        self._taken = self._sent = 0  # rounds that took the queued batches, and rounds sent
        self._progress = asyncio.Event()  # set (and replaced) as each round is sent (`drain`)
        self.counters = {"sent": 0, "received": 0, "send_failures": 0, "reconnects": 0, "lost": 0}

    # --- sending ------------------------------------------------------------------------------

    def publish(self, request_id: str, text: str, arrived: float | None = None) -> None:
        """Queue for every other process's viewers of the request; never waits. `arrived`: a
        patch's upstream arrival (metrics.ARRIVED), carried for one patch per batch."""
        texts = self._outgoing.setdefault(request_id, [])
        texts.append(text)
        if arrived is not None:
            self._arrived[request_id] = (len(texts) - 1, arrived)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(
                self._send_rounds(), name="relay-fanout-sender", context=contextvars.Context())

    async def drain(self) -> None:
        """Until everything queued now is sent (a stopping process: its last patches reach the other
        processes' viewers before the runner that takes over sends its first). Not what is
        published meanwhile: a runner still busy ending (a tool round) would hold every hand-off."""
        target = self._taken + (1 if self._outgoing else 0)
        while self._sent < target and self._sender is not None and not self._sender.done():
            await self._progress.wait()

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """No batch is being sent within: the round in flight ends first, the next waits (the
        layer's connections may be closed meanwhile without losing one)."""
        async with self._sending:
            yield

    async def _send_rounds(self) -> None:
        if self.inbox is None and self._commit_asked is not None:
            try:  # the batches' origin: this process's own come back to it when it has viewers too
                await self._ensure_inbox()
            except Exception:  # the layer is away: the batches go without one
                logger.info("no inbox for commit requests yet", exc_info=True)
        try:
            while self._outgoing or self._trailing:
                await asyncio.sleep(REMOTE_FLUSH_S)
                async with self._sending:
                    batches, self._outgoing = self._outgoing, {}
                    stamps, self._arrived = self._arrived, {}
                    self._taken += 1
                    await self._send_round(batches, stamps)
                    self._sent += 1
                self._advance()
        finally:
            self._advance()  # a drain waiting on a sender that ended (cancelled) returns

    async def _send_round(self, batches: dict[str, list[str]], stamps: dict[str, tuple[int, float]]) -> None:
        items = {request_id: [request_id, texts, stamps.get(request_id)] for request_id, texts in batches.items()}
        try:
            members = await self._directory.members([group_name(r) for r in items]) if self._directory else None
        except Exception:  # Redis away: the per-request sends fail (and are counted) the same way
            logger.info("reading the groups' members failed", exc_info=True)
            members = None
        if members is None:
            for inbox in self._numbers:  # whatever this round carried is likely lost: the next tells
                self._numbers[inbox] += 1
                self._before[inbox] = list(items)
            for request_id, item in items.items():
                await self._send(self.layer.group_send, group_name(request_id), {"items": [item]})
            return
        by_inbox: dict[str, list[list[Any]]] = {}
        for request_id, item in items.items():
            for inbox in members.get(group_name(request_id), ()):
                if inbox != self.inbox:  # this process's own viewers had it directly
                    by_inbox.setdefault(inbox, []).append(item)
        for inbox in self._trailing - by_inbox.keys():
            by_inbox[inbox] = []  # one more after the last: a lost last message is noticed too
        self._trailing = {inbox for inbox, its in by_inbox.items() if its}
        for inbox, its in by_inbox.items():
            number = self._numbers[inbox] = self._numbers.get(inbox, 0) + 1
            before, self._before[inbox] = self._before.get(inbox, []), [item[0] for item in its]
            await self._send(self.layer.send, inbox, {"items": its, "number": number, "before": before})

    async def _send(self, send: Callable[[str, dict[str, Any]], Awaitable[None]], to: str,
                    message: dict[str, Any]) -> None:
        try:
            await send(to, {"type": "relay.batches", "origin": self.inbox or "", **message})
            self.counters["sent"] += 1
        except ChannelFull:  # a process gone without leaving its groups: its inbox fills, then this
            self.counters["send_failures"] += 1
            logger.info("the inbox %s is full", to)
        except Exception:  # best effort: viewers converge by heartbeat and resync
            self.counters["send_failures"] += 1
            logger.warning("sending the batches to %s failed", to, exc_info=True)

    def _advance(self) -> None:
        """Wake whoever waits for a round (`drain`); the next wait is for the next one (an event
        left set would make `drain` spin without ever yielding to the sender)."""
        self._progress.set()
        self._progress = asyncio.Event()

    # --- receiving ----------------------------------------------------------------------------

    async def join(self, request_id: str) -> None:
        """Hear the request's messages in this process (its first local viewer)."""
        if request_id in self.joined:
            return
        self.joined.add(request_id)
        await self._ensure_inbox()
        assert self.inbox is not None
        try:
            async with asyncio.timeout(JOIN_TIMEOUT_S):
                await self.layer.group_add(group_name(request_id), self.inbox)
        except Exception:  # the reader joins again when the layer is back
            logger.warning("joining the group of %s failed; will retry", request_id, exc_info=True)

    async def leave(self, request_id: str) -> None:
        if request_id not in self.joined:
            return
        self.joined.discard(request_id)
        self._asked_at.pop(request_id, None)
        self._origins.pop(request_id, None)
        if self.inbox is not None:
            try:
                async with asyncio.timeout(JOIN_TIMEOUT_S):
                    await self.layer.group_discard(group_name(request_id), self.inbox)
            except Exception:  # the group membership expires on its own
                logger.info("leaving the group of %s failed", request_id, exc_info=True)

    async def _ensure_inbox(self) -> None:
        if self.inbox is None:
            # The default prefix, like every consumer's channel: channels_redis reads a process's
            # channels from one Redis list per prefix, under one lock, so an inbox of its own prefix
            # would wait behind the consumers' blocking reads and never be served.
            self.inbox = await self.layer.new_channel()
        loop = asyncio.get_running_loop()
        if self._reader is None or self._reader.done():
            self._reader = loop.create_task(self._read(), name="relay-fanout-reader", context=contextvars.Context())
        if self._keeper is None or self._keeper.done():
            self._keeper = loop.create_task(self._keep_joined(), name="relay-fanout-keeper",
                                            context=contextvars.Context())

    async def _keep_joined(self) -> None:
        while self.joined or self.serving:
            await asyncio.sleep(REJOIN_S)
            await self._rejoin()

    async def _read(self) -> None:
        backoff = Backoff()
        while True:
            assert self.inbox is not None
            try:
                message = await self.layer.receive(self.inbox)
            except asyncio.CancelledError:
                raise
            except Exception:
                await backoff.wait(logger, "the process inbox lost the channel layer")
                self.counters["reconnects"] += 1
                await self._rejoin()
                continue
            backoff.reset()
            request_id = str(message.get("request_id"))
            if message.get("type") == "relay.commit":
                if self._commit_asked is not None:
                    self._commit_asked(request_id)
                if message.get("reply_to") and self._live_view is not None:
                    self._spawn(self._reply(request_id, str(message["reply_to"])))
                continue
            if message.get("type") == "relay.view":
                if request_id in self.joined and self._view_arrived is not None:
                    self._view_arrived(request_id, str(message.get("text")))
                continue
            if message.get("origin") == self.inbox:
                continue  # this process's own messages reached its viewers directly
            origin = str(message.get("origin") or "")
            if message.get("type") == "relay.batches":
                self.counters["received"] += 1
                self._count(origin, message.get("number"), message.get("before"))
                for item in message.get("items") or ():
                    self._hear(origin, *item)
            elif message.get("type") == "relay.batch":  # from a process of the release before
                self.counters["received"] += 1
                self._hear(origin, request_id, message.get("texts"), message.get("arrived"))

    def _hear(self, origin: str, request_id: object, texts: object, arrived: object) -> None:
        if request_id in self.joined and isinstance(texts, Sequence):
            self._origins[str(request_id)] = origin
            self._deliver(str(request_id), list(texts), _stamp(arrived))

    def _count(self, origin: str, number: object, before: object) -> None:
        """A message's number from its sender: one skipped was lost on the way, and the viewers of
        the requests it held (`before` names them when only one was) resync now."""
        if not isinstance(number, int):
            return
        last = self._heard.pop(origin, None)
        self._heard[origin] = number  # the most recently heard last, so the oldest goes first
        if len(self._heard) > MAX_SENDERS:
            del self._heard[next(iter(self._heard))]
        if last is None or number <= last + 1:
            return
        self.counters["lost"] += number - last - 1
        FANOUT_LOST.inc(number - last - 1)
        if number == last + 2 and isinstance(before, list):
            requests = [r for r in before if r in self.joined]
        else:  # more than one: any request last heard from that sender
            requests = [r for r, o in self._origins.items() if o == origin and r in self.joined]
        logger.warning("%d message(s) from %s were lost on the way here: %d request(s) resync",
                       number - last - 1, origin, len(requests))
        if requests and self._missed is not None:
            self._missed(requests)

    async def ask_commit(self, request_id: str) -> bool:
        """Ask the process that runs the request (through its ask group) to commit a checkpoint
        now and send its live view here; at most once per ASK_EVERY_S. False: not asked now."""
        now = asyncio.get_running_loop().time()
        if request_id not in self.joined or now < self._asked_at.get(request_id, -ASK_EVERY_S) + ASK_EVERY_S:
            return False
        self._asked_at[request_id] = now
        try:
            await self._ensure_inbox()
            async with asyncio.timeout(JOIN_TIMEOUT_S):
                await self.layer.group_send(ask_group(request_id), {
                    "type": "relay.commit", "request_id": request_id, "reply_to": self.inbox or ""})
        except Exception:  # best effort: the next interval's checkpoint comes anyway
            logger.info("asking to commit %s failed", request_id, exc_info=True)
            return False
        return True

    async def serve_asks(self, request_id: str) -> None:
        """A runner here runs the request: join its ask group (`ask_commit`) until `stop_asks`."""
        self.serving.add(request_id)
        try:
            await self._ensure_inbox()
            assert self.inbox is not None
            async with asyncio.timeout(JOIN_TIMEOUT_S):
                await self.layer.group_add(ask_group(request_id), self.inbox)
        except Exception:  # the reader joins again when the layer is back
            logger.info("joining the ask group of %s failed", request_id, exc_info=True)
        if request_id not in self.serving:  # its runner ended meanwhile
            await self.stop_asks(request_id)

    async def stop_asks(self, request_id: str) -> None:
        self.serving.discard(request_id)
        if self.inbox is not None:
            try:
                async with asyncio.timeout(JOIN_TIMEOUT_S):
                    await self.layer.group_discard(ask_group(request_id), self.inbox)
            except Exception:  # the membership expires on its own
                logger.info("leaving the ask group of %s failed", request_id, exc_info=True)

    async def _reply(self, request_id: str, reply_to: str) -> None:
        """The live view of a request that runs here, to the process that asked for it."""
        assert self._live_view is not None
        try:
            text = await self._live_view(request_id)
            if text is not None:
                async with asyncio.timeout(JOIN_TIMEOUT_S):
                    await self.layer.send(reply_to, {"type": "relay.view", "request_id": request_id, "text": text})
        except Exception:  # best effort: the asking process reads the commit instead
            logger.info("sending the view of %s to %s failed", request_id, reply_to, exc_info=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work, context=contextvars.Context())
        self._replies.add(task)
        task.add_done_callback(self._replies.discard)

    async def _rejoin(self) -> None:
        """A restarted Redis has no groups: join every request with viewers here again, and the
        ask group of every request run here."""
        assert self.inbox is not None
        groups = [group_name(r) for r in list(self.joined)] + [ask_group(r) for r in list(self.serving)]
        for group in groups:
            try:
                async with asyncio.timeout(JOIN_TIMEOUT_S):
                    await self.layer.group_add(group, self.inbox)
            except Exception:
                return  # still away: the next failure tries again


def _stamp(raw: object) -> tuple[int, float] | None:
    """A batch's patch-lag stamp as sent (msgpack turns the tuple into a list), or None."""
    if isinstance(raw, Sequence) and len(raw) == 2 and isinstance(raw[0], int) and isinstance(raw[1], float):
        return raw[0], raw[1]
    return None


class _RedisDirectory:
    """The members of many groups of a channels_redis layer, read in one pipelined round trip per
    Redis host (a `group_send` reads them the same way, one group at a time: its group keys, its
    shards and its expiry are the layer's own, read here through its attributes)."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer

    @classmethod
    def of(cls, layer: BaseChannelLayer) -> _RedisDirectory | None:
        try:
            from channels_redis.core import RedisChannelLayer  # type: ignore[import-untyped]
        except ImportError:  # the in-memory layer only
            return None
        return cls(layer) if isinstance(layer, RedisChannelLayer) else None

    async def members(self, groups: list[str]) -> dict[str, list[str]]:
        layer, shards = self.layer, dict[int, list[str]]()
        for group in groups:
            shards.setdefault(layer.consistent_hash(group), []).append(group)
        since = int(time.time()) - layer.group_expiry  # older members have expired (group_send's rule)
        out: dict[str, list[str]] = {}
        for index, names in shards.items():
            async with layer.connection(index).pipeline(transaction=False) as pipe:
                for group in names:
                    pipe.zrangebyscore(layer._group_key(group), f"({since}", "+inf")
                found = await pipe.execute()
            for group, channels in zip(names, found, strict=True):
                out[group] = [c.decode() for c in channels]
        return out

"""Fan-out between processes, through the channel layer (Redis), in few and large messages.

Measured for the scaled-out issue: one `group_send` per patch to one channel per viewer made
each web process receive (one at a time, three Redis round trips each) a message per viewer per
patch; the lag across processes grew to seconds with every process under a third of a core. Here:

- every process with viewers joins one group (VIEWERS_GROUP) with one inbox channel of its own,
  and hands what arrives for the requests it has viewers of to them (`Hub.deliver`);
- a process that runs streams batches what it publishes and sends ONE message per REMOTE_FLUSH_S
  with every request's messages in order (patches, heartbeats, terminals), from one sending task:
  10 messages a second per runner process, whatever the number of streams or viewers (measured:
  one message per request per round still left 2-3 s of lag at 50 streams on two cores);
- the inbox reader survives the layer going away (Redis restarting): it backs off, reconnects and
  joins its groups again (a restarted Redis has forgotten them). Meanwhile viewers converge by
  heartbeats and resyncs (see consumers.py), and nothing here ever blocks a runner.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable

from channels.layers import BaseChannelLayer

logger = logging.getLogger(__name__)

REMOTE_FLUSH_S = 0.1  # what other processes' viewers wait at most, on top of the flush interval
JOIN_TIMEOUT_S = 3.0
REJOIN_S = 10.0  # memberships renewed this often: a Redis that restarted unnoticed forgot them
BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)


VIEWERS_GROUP = "relay.viewers"  # every process with viewers, through its inbox


class Fanout:
    def __init__(self, layer: BaseChannelLayer, deliver: Callable[[str, list[str]], None]) -> None:
        self.layer = layer
        self._deliver = deliver  # (request id, texts) -> the local viewers
        self.inbox: str | None = None
        self.joined: set[str] = set()  # the requests with viewers in this process
        self._in_group = False
        self._outgoing: dict[str, list[str]] = {}
        self._sender: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self.counters = {"sent": 0, "received": 0, "send_failures": 0, "reconnects": 0}

    # --- sending ------------------------------------------------------------------------------

    def publish(self, request_id: str, text: str) -> None:
        """Queue for every other process's viewers of the request; never waits."""
        self._outgoing.setdefault(request_id, []).append(text)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(
                self._send_rounds(), name="relay-fanout-sender", context=contextvars.Context())

    async def _send_rounds(self) -> None:
        while self._outgoing:
            await asyncio.sleep(REMOTE_FLUSH_S)
            batches, self._outgoing = self._outgoing, {}
            try:
                await self.layer.group_send(VIEWERS_GROUP, {
                    "type": "relay.batch", "origin": self.inbox or "", "batches": batches})
                self.counters["sent"] += 1
            except Exception:  # best effort: viewers converge by heartbeat and resync
                self.counters["send_failures"] += 1
                logger.warning("group_send of %d requests' messages failed", len(batches), exc_info=True)

    # --- receiving ----------------------------------------------------------------------------

    async def join(self, request_id: str) -> None:
        """Hear the request's messages in this process (its first local viewer)."""
        self.joined.add(request_id)
        await self._ensure_inbox()
        if not self._in_group:
            await self._rejoin()

    async def leave(self, request_id: str) -> None:
        self.joined.discard(request_id)  # the inbox stays in the group; its messages are ignored

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
        while self.joined:
            await asyncio.sleep(REJOIN_S)
            await self._rejoin()

    async def _read(self) -> None:
        failures = 0
        while True:
            assert self.inbox is not None
            try:
                message = await self.layer.receive(self.inbox)
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
                failures += 1
                logger.warning("the process inbox lost the channel layer; again in %.1fs", delay, exc_info=True)
                await asyncio.sleep(delay)
                self.counters["reconnects"] += 1
                await self._rejoin()
                continue
            failures = 0
            if message.get("type") != "relay.batch" or message.get("origin") == self.inbox:
                continue  # this process's own messages reached its viewers directly
            self.counters["received"] += 1
            for request_id, texts in (message.get("batches") or {}).items():
                if request_id in self.joined:
                    self._deliver(request_id, list(texts))

    async def _rejoin(self) -> None:
        """Join (again: a restarted Redis has no groups) the group every runner process sends to."""
        assert self.inbox is not None
        try:
            async with asyncio.timeout(JOIN_TIMEOUT_S):
                await self.layer.group_add(VIEWERS_GROUP, self.inbox)
            self._in_group = True
        except Exception:  # still away: the next failure or keeper round tries again
            self._in_group = False
            logger.warning("joining the viewers' group failed; will retry", exc_info=True)

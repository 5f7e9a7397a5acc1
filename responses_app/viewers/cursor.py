"""The viewer protocol: one viewer's cursor, the revision its client holds and what to send it
next. Every viewer has one: a request socket (sender.py sends its outbox to the browser) and a
follower (follow.py: the AG-UI and AI SDK streams, `api.subscribe`), which applies the patches
itself. No socket and no database in it; time comes from `clock` and timers from `later` (in a
viewer the event loop's `time` and `call_later`), so every rule is testable without waiting.

The hub offers every message of the request to the cursor (`offer`: it never waits). The cursor
queues what continues the client's revision in a bounded outbox, read in order by its one reader
(`take`). When the client is behind, the cursor puts one RESYNC marker in the outbox instead of
what the client could not apply, and the reader sends (or takes) a snapshot there. The rules, all
in `offer`:

- before the first snapshot, patches and heartbeats are dropped: the snapshot being taken is at
  least as new;
- a patch at or below the client's revision is stale: dropped;
- a patch that does not continue the client's revision (lost across processes, dropped by a
  full outbox, or past the committed view a web process just sent), any patch while a resync is
  pending, and every patch to a client that reads snapshots only (another protocol): not sent; a
  resync follows in one step instead of a storm: the first CATCH_UPS of a viewer's after
  CATCH_UP_S (`catch_up`), then at most one snapshot per RESYNC_MIN_S (always, for a client
  that reads snapshots only);
- a heartbeat ahead of the client's revision means it is behind: a resync, throttled alike;
- a terminal ahead of a client that must hold the final view before the end (one that reads
  snapshots only, and a follower): a resync now (the snapshot of an ended request is followed by
  its terminal);
- a full outbox: everything queued is dropped for one resync (bounded memory, and the runner
  never waits); a terminal is kept;
- a snapshot older than what the client holds (a reconnecting tab says what it holds, `holds`,
  and a web process may know only an older committed view) is never sent while the request runs:
  the client keeps its newer text; a first one is skipped and the patches go on from what the
  client holds, a later one is asked for again (`catch_up`) until the view caught up (`stale`);
- so is a snapshot no newer than the client's while the view here is behind the patches heard
  (a web process that does not run the request, between a checkpoint and the next: `behind` in
  follow.py); one newer than the client's but behind goes, and is asked for again alike.

At most one RESYNC waits in the outbox however often one is asked for (`resync_now`: a socket
client's own `snapshot` message too). After SILENCE_S with nothing sent, `take` returns IDLE: the
reader then asks whether the request ended elsewhere with its terminal lost on the way (a
snapshot then), and a socket sends a ping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from ..ops.metrics import ARRIVED

# A viewer may fall behind by as many patches as the hub keeps for a late reader (hub.RECENT_PATCHES):
# a burst after a stall (a paused tab, a slow proxy, a busy stream's client) drains in order rather
# than costing a whole view. A slot holds a reference: the texts are shared by every viewer.
OUTBOX_SIZE = 256
# At most one snapshot per viewer per second (about a checkpoint interval): a viewer in a stream of
# gaps catches up in one step, and a resync without a runner here is a database read.
RESYNC_MIN_S = 1.0
# A view here older than what the client holds or the patches heard, or a patch that does not chain:
# a snapshot this soon, this many times per viewer (its runner was asked to commit: Hub.ask_commit),
# then every RESYNC_MIN_S.
CATCH_UP_S = 0.25
CATCH_UPS = 6
# Below the idle timeouts of common proxies (30 s and up), so a long silent reasoning phase is not
# cut; and the latest a viewer learns of an end whose terminal was lost between processes.
SILENCE_S = 20.0
RESYNC = "resync"  # outbox marker: send a fresh snapshot instead of the patches dropped before it
IDLE = "idle"  # outbox marker: nothing was sent for SILENCE_S


class Timer(Protocol):
    def cancel(self) -> None: ...


Clock = Callable[[], float]
Later = Callable[[float, Callable[[], None]], Timer]


class Cursor:
    """The delivery state of one viewer (see the module docstring); registered with the hub as its
    viewer, so `offer` is called once per message and viewer with nothing in between.

    `wire`: the outbox holds each message's wire text (a socket sends it as it is); else the message
    itself (a follower applies it)."""

    __slots__ = ("outbox", "sent_revision", "snapshots_only", "wire", "whole_end", "overflows", "resyncs",
                 "resync_pending", "resync_queued", "last_snapshot", "sent_at", "lag_text", "lag_at", "holds",
                 "catch_ups", "_clock", "_later", "_silence_timer")

    def __init__(self, *, clock: Clock, later: Later, snapshots_only: bool = False, wire: bool = True,
                 size: int = OUTBOX_SIZE, holds: int = -1) -> None:
        self.outbox: asyncio.Queue[Any] = asyncio.Queue(maxsize=size)
        self.sent_revision = -1  # the revision the client holds; -1 until its first snapshot
        self.holds = holds  # the revision a reconnecting client said it holds (-1: none)
        self.catch_ups = 0  # snapshots asked for soon (`catch_up`): the view here was behind
        self.snapshots_only = snapshots_only  # the client reads another protocol than this server's
        self.wire = wire
        self.whole_end = snapshots_only or not wire  # the client holds the final view before the terminal
        self.overflows = 0
        self.resyncs = 0  # snapshots sent, the first included
        self.resync_pending = False  # patches wait for a snapshot
        self.resync_queued = False  # a RESYNC marker is in the outbox
        self.last_snapshot = 0.0
        self.sent_at = clock()  # when the reader last sent (or handed over) something
        self._silence_timer: Timer | None = None
        self.lag_text: str | None = None  # the latest stamped patch queued, and its upstream arrival
        self.lag_at = 0.0
        self._clock = clock
        self._later = later

    def offer(self, message: dict[str, Any], text: str) -> None:
        """A message of the request (`text` its wire form): queue it, drop it, or resync instead."""
        kind = message["type"]
        revision = message.get("revision", 0)
        if self.sent_revision < 0 and kind in ("patch", "ping"):
            return
        if kind == "patch":
            if revision <= self.sent_revision:
                return
            if self.snapshots_only:
                self.resync_soon()
                return
            if message["base"] != self.sent_revision or self.resync_pending:
                self.catch_up()
                return
        elif kind == "ping" and revision > self.sent_revision >= 0:
            self.resync_soon()
            return
        elif kind == "terminal" and self.whole_end and revision > self.sent_revision >= 0:
            self.resync_now()
            return
        item = text if self.wire else message
        try:
            self.outbox.put_nowait(item)
        except asyncio.QueueFull:
            self._overflow(kind, item)
            return
        if kind == "patch":
            self.sent_revision = revision
            if ARRIVED in message:
                self.lag_text, self.lag_at = text, message[ARRIVED]

    def _overflow(self, kind: str, item: Any) -> None:
        self.overflows += 1
        self._drain()
        self.resync_queued = False
        self.resync_now()
        if kind not in ("patch", "ping"):
            self.outbox.put_nowait(item)  # a terminal message is never dropped

    def _drain(self) -> None:
        outbox = self.outbox
        while not outbox.empty():
            outbox.get_nowait()

    def resync_soon(self, after: float = RESYNC_MIN_S) -> None:
        """A snapshot once `after` passed since the last one (now, if it has)."""
        if self.resync_pending:
            return
        self.resync_pending = True
        self._later(max(0.0, self.last_snapshot + after - self._clock()), self._resync_due)

    def _resync_due(self) -> None:
        if self.resync_pending:  # unless a snapshot went out meanwhile
            self.resync_now()

    def hurry(self, revision: int) -> None:
        """A view at `revision` reached this process (its runner elsewhere sent it when asked): a
        viewer whose client holds less takes it now, not when its `catch_up` comes due or a patch
        that does not chain tells it is behind."""
        if revision > max(self.sent_revision, self.holds) >= 0 and not self.snapshots_only:
            self.resync_now()

    def missed(self) -> None:
        """Messages of the request were lost on their way to this process (relay/fanout.py): a
        snapshot now, which brings the end of a request whose `terminal` was among them, instead
        of after SILENCE_S. Before the first snapshot there is nothing to do: it is yet to come."""
        if self.sent_revision >= 0:
            self.resync_now()

    def resync_now(self) -> None:
        """A snapshot next: one RESYNC in the outbox, however often it is asked for."""
        self.resync_pending = True
        if self.resync_queued:
            return
        self.resync_queued = True
        try:
            self.outbox.put_nowait(RESYNC)
        except asyncio.QueueFull:  # what is queued is older than the snapshot anyway
            self._drain()
            self.outbox.put_nowait(RESYNC)

    # --- the reader's side ----------------------------------------------------------------------

    async def take(self, item: Any = None) -> Any:
        """The next thing for the client, in order: a queued message, RESYNC (a snapshot now) or
        IDLE (nothing sent for SILENCE_S). The reader calls `sent` once it has handled it. `item`:
        what the reader already took from the outbox itself (a socket's hot path), if anything."""
        outbox = self.outbox
        while True:
            if item is None:
                item = outbox.get_nowait() if not outbox.empty() else await outbox.get()
            if item is RESYNC:
                self.resync_queued = False  # a later ask queues another
            elif item is IDLE and self._clock() - self.sent_at < SILENCE_S:
                item = None
                continue  # something went out since it was queued
            return item

    def sent(self) -> None:
        self.sent_at = self._clock()

    def snapshot_sent(self, revision: int) -> bool:
        """The client now holds `revision`; True when this was a resync (not the first snapshot)."""
        resync = self.sent_revision >= 0
        self.resync_pending = False
        self.last_snapshot = self._clock()
        self.resyncs += 1
        self.sent_revision = revision
        return resync

    def stale(self, revision: int, ended: bool, behind: bool = False) -> bool:
        """True when a snapshot at `revision` would take the client back, or would not move it on
        while the view here is `behind` (patches newer than it were heard): it is not sent. Once
        the request ended, its committed view is the last word and always goes."""
        held = max(self.sent_revision, self.holds)
        if ended or revision > held or (revision == held and not behind):
            return False
        self.resync_pending = False
        self.last_snapshot = self._clock()
        if self.sent_revision < 0:  # the first: the client holds a newer view, patches go on from it
            self.sent_revision = self.holds
            if not behind:
                return True
        self.catch_up()  # the view here has not caught up yet: ask again
        return True

    def catch_up(self) -> None:
        """The view here is behind the client's or the patches heard (its runner was asked to
        commit), or a patch did not continue the client's revision: a snapshot soon, the first
        CATCH_UPS times for this viewer, then at the usual pace. Bounded: a checkpoint is at most
        an interval away, and a viewer that keeps falling behind costs a read a second."""
        if self.resync_pending:
            return
        self.catch_ups += 1
        self.resync_soon(CATCH_UP_S if self.catch_ups <= CATCH_UPS else RESYNC_MIN_S)

    def watch_silence(self) -> None:
        """From now on, queue IDLE whenever nothing was sent for SILENCE_S: one timer per viewer,
        re-armed lazily (never one per message). Once is enough; more calls change nothing."""
        if self._silence_timer is None:
            self._silence_timer = self._later(max(0.0, self.sent_at + SILENCE_S - self._clock()),
                                              self._silence_check)

    def stop(self) -> None:
        if self._silence_timer is not None:
            self._silence_timer.cancel()
            self._silence_timer = None

    def _silence_check(self) -> None:
        now = self._clock()
        due = self.sent_at + SILENCE_S
        if now >= due:
            self.idle()  # unless the reader is busy: it sends first, and is checked again
            due = now + SILENCE_S
        self._silence_timer = self._later(due - now, self._silence_check)

    def idle(self) -> bool:
        """Silent too long: queue IDLE for the reader unless it has something to send."""
        if self.outbox.empty():
            self.outbox.put_nowait(IDLE)
            return True
        return False

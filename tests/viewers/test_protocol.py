"""The viewer protocol (viewers/cursor.py) without a socket or a database: what a viewer's client
holds, what is queued for it, when it resyncs instead, when silence is reported, and that a slow
viewer never slows the runner (its bounded outbox turns a backlog into one snapshot). The same
cursor serves a socket (wire texts) and a follower (messages). Time is a fake clock; timers are
recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from responses_app.ops.metrics import ARRIVED
from responses_app.relay.hub import RECENT_PATCHES
from responses_app.viewers import cursor as protocol
from responses_app.viewers.cursor import (
    CATCH_UP_S,
    CATCH_UPS,
    IDLE,
    OUTBOX_SIZE,
    RESYNC,
    RESYNC_MIN_S,
    SILENCE_S,
    Cursor,
)


class Clock:
    """A fake clock with the event loop's `call_later`: `advance` runs what came due."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def __call__(self) -> float:
        return self.now

    def later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = (self.now + delay, callback)
        self.timers.append(timer)
        return Timer(self, timer)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [t for t in self.timers if t[0] <= self.now]
        self.timers = [t for t in self.timers if t[0] > self.now]
        for _, callback in sorted(due, key=lambda t: t[0]):
            callback()


class Timer:
    def __init__(self, clock: Clock, timer: tuple[float, Callable[[], None]]) -> None:
        self.clock, self.timer = clock, timer

    def cancel(self) -> None:
        if self.timer in self.clock.timers:
            self.clock.timers.remove(self.timer)


def viewer(revision: int = 0, *, snapshots_only: bool = False, wire: bool = True,
           size: int = OUTBOX_SIZE) -> tuple[Cursor, Clock]:
    clock = Clock()
    cursor = Cursor(clock=clock, later=clock.later, snapshots_only=snapshots_only, wire=wire, size=size)
    if revision >= 0:
        cursor.snapshot_sent(revision)
        clock.now += 10  # that first snapshot was a while ago
    return cursor, clock


def patch(revision: int, base: int | None = None) -> tuple[dict[str, Any], str]:
    message = {"type": "patch", "base": revision - 1 if base is None else base, "revision": revision, "ops": []}
    return message, f'{{"revision":{revision}}}'


def queued(cursor: Cursor) -> list[Any]:
    """What the reader takes, in order, until the outbox is empty."""
    async def take_all() -> list[Any]:
        taken = []
        while not cursor.outbox.empty():
            taken.append(await asyncio.wait_for(cursor.take(), 1))
        return taken

    return asyncio.run(take_all())


def test_patches_that_continue_the_client_are_queued_in_order() -> None:
    cursor, _ = viewer(3)
    for revision in (4, 5, 6):
        cursor.offer(*patch(revision))
    assert queued(cursor) == ['{"revision":4}', '{"revision":5}', '{"revision":6}']
    assert cursor.sent_revision == 6 and not cursor.resync_pending


def test_nothing_before_the_first_snapshot_but_a_terminal() -> None:
    cursor, _ = viewer(-1)
    cursor.offer(*patch(1))
    cursor.offer({"type": "ping", "revision": 5}, "ping")
    assert cursor.outbox.empty(), "the first snapshot, being taken, is at least as new"
    cursor.offer({"type": "terminal", "revision": 5, "status": "completed"}, "terminal")
    assert queued(cursor) == ["terminal"]


def test_overflow_drops_the_backlog_for_a_resync_and_keeps_the_terminal() -> None:
    cursor, _ = viewer(0)
    for revision in range(1, OUTBOX_SIZE + 11):
        cursor.offer(*patch(revision))
        assert cursor.outbox.qsize() <= OUTBOX_SIZE
    cursor.offer({"type": "terminal", "revision": 999}, '{"type":"terminal"}')
    sent = queued(cursor)
    assert cursor.overflows >= 1
    assert RESYNC in sent
    assert sent[-1] == '{"type":"terminal"}'
    assert len(sent) < OUTBOX_SIZE


def test_stale_patches_are_not_queued() -> None:
    cursor, _ = viewer(10)
    cursor.offer(*patch(9))
    cursor.offer(*patch(10))
    assert cursor.outbox.empty()
    cursor.offer(*patch(11))
    assert cursor.outbox.qsize() == 1 and cursor.sent_revision == 11


def test_a_gap_is_held_for_one_snapshot_soon_a_few_times_then_at_most_one_a_second() -> None:
    cursor, clock = viewer(10)
    cursor.offer(*patch(13))  # 11 and 12 were lost on the way
    cursor.offer(*patch(14))
    cursor.offer(*patch(15))
    assert cursor.outbox.empty(), "the client is not sent what it cannot apply"
    assert len(clock.timers) == 1, "one resync scheduled, not one per patch"
    assert clock.timers[0][0] == clock.now, "the last snapshot was long ago: now"
    clock.advance(0)
    assert queued(cursor) == [RESYNC]
    revision = 15
    for _ in range(CATCH_UPS - 1):  # a gap right after a snapshot: the view sent was behind, soon
        assert cursor.snapshot_sent(revision) is True, "a snapshot after the first is a resync"
        revision += 3
        cursor.offer(*patch(revision))
        assert clock.timers[-1][0] == clock.now + CATCH_UP_S
        clock.advance(CATCH_UP_S)
        assert queued(cursor) == [RESYNC]
    cursor.snapshot_sent(revision)
    cursor.offer(*patch(revision + 3))  # past its catch-ups: throttled
    assert clock.timers[-1][0] == clock.now + RESYNC_MIN_S
    clock.advance(RESYNC_MIN_S / 2)
    assert cursor.outbox.empty()
    clock.advance(RESYNC_MIN_S / 2)
    assert queued(cursor) == [RESYNC]


def test_a_resync_due_after_a_snapshot_went_out_is_not_sent() -> None:
    cursor, clock = viewer(10)
    cursor.offer(*patch(13))
    cursor.resync_now()  # the client asked for one meanwhile
    assert queued(cursor) == [RESYNC]
    cursor.snapshot_sent(13)
    clock.advance(RESYNC_MIN_S)
    assert cursor.outbox.empty()


def test_patches_wait_while_a_resync_is_pending() -> None:
    cursor, _ = viewer(10)
    cursor.resync_now()
    cursor.offer(*patch(11))
    assert queued(cursor) == [RESYNC], "the snapshot will carry it"


def test_at_most_one_snapshot_waits_however_often_it_is_asked_for() -> None:
    cursor, _ = viewer(0)
    for _ in range(3000):
        cursor.resync_now()
    assert queued(cursor) == [RESYNC]
    cursor.resync_now()
    assert queued(cursor) == [RESYNC], "taken, it can be asked for again"


def test_a_resync_asked_for_with_a_full_outbox_replaces_it() -> None:
    cursor, _ = viewer(0, size=4)
    for revision in range(1, 5):
        cursor.offer(*patch(revision))
    cursor.resync_now()
    assert queued(cursor) == [RESYNC]


def test_a_heartbeat_ahead_of_the_client_means_it_is_behind() -> None:
    cursor, clock = viewer(10)
    cursor.offer({"type": "ping", "revision": 10, "status": "streaming"}, '{"type":"ping"}')
    assert cursor.outbox.get_nowait() == '{"type":"ping"}', "level: passed on"
    cursor.offer({"type": "ping", "revision": 12, "status": "streaming"}, '{"type":"ping"}')
    assert cursor.outbox.empty()
    clock.advance(0)
    assert queued(cursor) == [RESYNC]


def test_a_snapshots_only_client_gets_no_patch_and_its_ending_as_a_snapshot() -> None:
    cursor, clock = viewer(10, snapshots_only=True)
    cursor.offer(*patch(11))
    clock.advance(0)
    assert queued(cursor) == [RESYNC]
    cursor.snapshot_sent(11)
    cursor.offer(*patch(12))
    assert clock.timers[-1][0] == clock.now + RESYNC_MIN_S, "at most one a second, never a catch-up's pace"
    cursor.offer({"type": "terminal", "revision": 12, "status": "completed"}, "terminal")
    assert queued(cursor) == [RESYNC], "at once, not throttled: the snapshot of an ended request ends it"
    cursor.snapshot_sent(12)
    cursor.offer({"type": "terminal", "revision": 12, "status": "completed"}, "terminal")
    assert queued(cursor) == ["terminal"]


def test_the_lag_probe_is_the_latest_stamped_patch_queued() -> None:
    cursor, _ = viewer(0)
    message, text = patch(1)
    message[ARRIVED] = 12.5
    cursor.offer(message, text)
    cursor.offer(*patch(2))
    assert cursor.lag_text is text and cursor.lag_at == 12.5


def test_idle_is_queued_only_when_the_reader_has_nothing_to_send() -> None:
    cursor, clock = viewer(0)
    assert cursor.idle()
    clock.now += SILENCE_S
    assert queued(cursor) == [IDLE]
    cursor.offer(*patch(1))
    assert not cursor.idle() and queued(cursor) == ['{"revision":1}']


def test_the_first_snapshot_is_not_a_resync() -> None:
    cursor, clock = viewer(-1)
    assert cursor.snapshot_sent(4) is False
    assert (cursor.sent_revision, cursor.resyncs, cursor.last_snapshot) == (4, 1, clock())


def test_one_set_of_constants_for_every_viewer() -> None:
    """A socket and a follower build the same cursor; it holds what the hub keeps for a late reader."""
    assert OUTBOX_SIZE == RECENT_PATCHES
    socket, _ = viewer(0)
    follower, _ = viewer(0, wire=False)
    assert socket.outbox.maxsize == follower.outbox.maxsize == OUTBOX_SIZE


def test_a_follower_is_queued_the_messages_under_the_same_rules() -> None:
    cursor, clock = viewer(3, wire=False)
    messages = [patch(revision)[0] for revision in (3, 4, 5, 7)]
    for message in messages:
        cursor.offer(message, "unused")
    clock.advance(0)
    assert queued(cursor) == [messages[1], messages[2], RESYNC], "stale dropped, the gap resynced"


def test_a_terminal_ahead_of_a_follower_brings_the_final_view_first() -> None:
    cursor, _ = viewer(3, wire=False)
    terminal = {"type": "terminal", "revision": 5, "status": "completed"}
    cursor.offer(terminal, "terminal")
    assert queued(cursor) == [RESYNC], "at once: the snapshot of an ended request is followed by its end"
    cursor.snapshot_sent(5)
    cursor.offer(terminal, "terminal")
    assert queued(cursor) == [terminal]


def test_a_terminal_ahead_of_a_socket_client_goes_as_it_is() -> None:
    cursor, _ = viewer(3)
    cursor.offer({"type": "terminal", "revision": 5, "status": "completed"}, "terminal")
    assert queued(cursor) == ["terminal"], "the browser client resyncs itself"


def test_a_follower_that_overflows_keeps_its_terminal_message() -> None:
    cursor, _ = viewer(0, wire=False, size=4)
    for revision in range(1, 5):
        cursor.offer(*patch(revision))
    terminal = {"type": "terminal", "revision": 4, "status": "completed"}
    cursor.offer(terminal, "terminal")  # the outbox is full
    assert cursor.overflows == 1
    assert queued(cursor) == [RESYNC, terminal]
    cursor.offer({**terminal, "revision": 9}, "terminal")
    assert queued(cursor) == [RESYNC], "one ahead while a resync is pending: the snapshot brings the end"


def test_silence_is_reported_once_per_silence_s_and_only_when_nothing_went_out() -> None:
    cursor, clock = viewer(0)
    cursor.sent()
    cursor.watch_silence()
    cursor.watch_silence()
    assert len(clock.timers) == 1, "one timer per viewer however often it is asked"
    clock.advance(SILENCE_S - 1)
    assert cursor.outbox.empty()
    cursor.offer(*patch(1))
    assert queued(cursor) == ['{"revision":1}']
    cursor.sent()  # the reader sent it: silence counts from here
    clock.advance(1)
    assert cursor.outbox.empty(), "not silent: something went out a second ago"
    clock.advance(SILENCE_S - 1)
    assert queued(cursor) == [IDLE]
    cursor.sent()
    clock.advance(SILENCE_S)
    assert queued(cursor) == [IDLE], "again after the next silence"
    cursor.stop()
    assert clock.timers == []


def test_an_idle_marker_overtaken_by_a_send_is_skipped() -> None:
    cursor, clock = viewer(0)
    clock.now += SILENCE_S
    cursor.idle()
    cursor.offer(*patch(1))
    cursor.sent()  # something went out after IDLE was queued: it is stale when taken
    assert queued(cursor) == ['{"revision":1}']


def test_silence_s_is_read_when_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test may shorten the silence (tests/relay/test_consumer.py does) without a new cursor."""
    monkeypatch.setattr(protocol, "SILENCE_S", 0.5)
    cursor, clock = viewer(0)
    cursor.sent()
    cursor.watch_silence()
    clock.advance(0.5)
    assert queued(cursor) == [IDLE]


def test_messages_lost_on_the_way_bring_a_snapshot_now() -> None:
    """The fan-out saw a message of the request lost (relay/fanout.py): its terminal may have been
    in it, so a snapshot now rather than after SILENCE_S; none before the first, which is to come."""
    cursor, _ = viewer(4)
    cursor.missed()
    cursor.missed()
    assert queued(cursor) == [RESYNC], "one, however often it is said"
    first, _ = viewer(-1)
    first.missed()
    assert first.outbox.empty()

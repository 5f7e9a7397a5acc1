"""When the relay sends a patch and when it takes a checkpoint: two pure policies.

Time is an argument (the caller's loop time in production, plain numbers in tests), like zulip's
event queue passes `now`; nothing here reads a clock, sleeps or sets a timer. The relay asks
`push(...)` after every chunk whether to act now, and arms one timer for `next_deadline()`.

FlushPolicy (patches to viewers): leading edge, then throttled, in patches worth their envelope.
Text after a quiet spell (none for `wait`) goes out at once, so does a boundary (a part, item or
response ended); a steady flow goes out at most once per interval, and only once `min_chars` of
text are pending or the oldest pending change has waited about `wait` (a chunk arriving within
half an interval of it carries the patch; without one, a timer half an interval after it).
Why `min_chars`: flushed on the interval alone, a slow answer's patches carried a delta or two
each and their envelope outweighed their text; waiting for a few deltas costs latency at slow
paces only (bench/README.md, wire). The interval is the setting times `scale`, which the relay's
pacer raises while the process is short of CPU; `wait` is never shorter than the interval.

CheckpointPolicy (when to take a checkpoint; the caller's writer commits it a little later, in
rounds): at boundaries (the caller says so), and while text flows: no sooner
than `interval` after the last one; then once `min_events` events have come, the stream has gone
quiet (no change for an interval), or `max_interval` has passed; the very first one as soon as
the interval allows, so a reload early in an answer already shows text. A fast answer is
checkpointed every `interval`, a slow one every `min_events` or `max_interval`: a 2,000-delta answer
costs a few dozen writes at 30 deltas/s as at 200.

Pure: no Django, no I/O.
"""

from __future__ import annotations


class FlushPolicy:
    __slots__ = ("base_interval", "_scale", "interval", "wait", "max_wait", "min_chars", "_last_flush",
                 "_last_change", "_last_text", "_first_pending", "_pending", "_chars")

    def __init__(self, interval: float, *, max_wait: float | None = None, min_chars: int = 0) -> None:
        if interval < 0 or (max_wait is not None and max_wait < 0) or min_chars < 0:
            raise ValueError(f"bad flush policy: interval {interval}, max_wait {max_wait}, min_chars {min_chars}")
        self.base_interval = interval
        self.max_wait = interval if max_wait is None else max_wait
        self.min_chars = min_chars
        self.scale = 1.0  # set by the pacer: > 1 while the process is behind
        self._last_flush: float | None = None
        self._last_change: float | None = None
        self._last_text: float | None = None  # the last change that appended text
        self._first_pending: float | None = None  # the oldest change not yet sent
        self._pending = False
        self._chars = 0  # text characters pending

    @property
    def scale(self) -> float:
        return self._scale

    @scale.setter
    def scale(self, scale: float) -> None:
        # `interval` and `wait` are read several times a chunk: attributes, set here, not properties.
        self._scale = scale
        self.interval = self.base_interval * scale
        # The longest a change waits for more text to share its patch (never under the interval).
        self.wait = max(self.max_wait, self.interval)

    def push(self, now: float, changed: bool, boundary: bool = False, chars: int = 0) -> bool:
        """Record a chunk's effect (`chars`: the text characters it appended); True when the caller
        should flush now."""
        quiet = chars > 0 and (self._last_text is None or now - self._last_text >= self.wait)
        # Chunks an interval apart each pass the throttle, however late the last flush's timer fired.
        spaced = self._last_change is None or now - self._last_change >= self.interval
        if changed:
            self._last_change = now
            if not self._pending:
                self._first_pending = now
            self._pending = True
        if chars > 0:
            self._last_text = now
            self._chars += chars
        if boundary or quiet:
            return True
        if self._last_flush is not None and now - self._last_flush < self.interval and not spaced:
            return False
        # A chunk carries the pending patch out once it holds enough text, or once its oldest
        # change has waited within half an interval of `wait` (the next chunk would come too late):
        # so its newest text leaves the moment it arrives.
        return self._chars >= self.min_chars or (
            self._first_pending is not None and now - self._first_pending >= self.wait - self.interval / 2)

    def due(self, now: float) -> bool:
        deadline = self.next_deadline()
        return deadline is not None and now >= deadline

    def next_deadline(self) -> float | None:
        """When pending changes must go out without another chunk; None with nothing pending."""
        if not self._pending:
            return None
        after = (self._last_flush if self._last_flush is not None else float("-inf")) + self.interval
        if self._chars >= self.min_chars:
            return after
        assert self._first_pending is not None
        return max(after, self._first_pending + self.wait + self.interval / 2)  # no chunk came: the flow paused

    def flushed(self, now: float, *, sent: bool) -> None:
        """The caller flushed (`sent`: a patch went out, which starts the next interval)."""
        if sent:
            self._last_flush = now
        self._pending = False
        self._first_pending = None
        self._chars = 0

    @property
    def last_change(self) -> float | None:
        return self._last_change


class CheckpointPolicy:
    __slots__ = ("interval", "min_events", "max_interval", "_last", "_events", "_interval_commits",
                 "_last_change", "_dirty")

    def __init__(self, *, interval: float, min_events: int, max_interval: float, now: float) -> None:
        if interval < 0 or min_events < 1:
            raise ValueError(f"bad checkpoint policy: interval {interval}, min_events {min_events}")
        self.interval = interval
        self.min_events = min_events
        self.max_interval = max(max_interval, interval)
        self._last = now  # the last checkpoint (or the start)
        self._events = 0  # events since it
        self._interval_commits = 0
        self._last_change: float | None = None
        self._dirty = False  # changes or events not yet in a checkpoint

    def push(self, now: float, events: int = 0, changed: bool = False) -> None:
        self._events += events
        if changed:
            self._last_change = now
        if events or changed:
            self._dirty = True

    @property
    def dirty(self) -> bool:
        return self._dirty

    def due(self, now: float) -> bool:
        """An interval checkpoint is due (boundaries are the caller's: it takes one at once)."""
        # Sums, not differences: the moments `next_deadline` computes, to the last bit (with
        # `now - last < interval` a timer fired at its deadline could find nothing due).
        if now < self._last + self.interval or not self._dirty:
            return False
        return (not self._interval_commits  # the first text a reload shows: taken early
                or self._events >= self.min_events
                or now >= self._last + self.max_interval
                or self._last_change is None or now >= self._last_change + self.interval)

    def may_commit(self, now: float) -> bool:
        """A checkpoint asked for out of turn (a web process whose viewer holds a newer view than
        the committed one) is taken: something is not committed, and the interval passed."""
        return self._dirty and now >= self._last + self.interval

    def next_deadline(self, now: float, *, not_before: float = 0.0) -> float | None:
        """The moment `due` turns true if no other event comes (None: nothing to commit).
        `not_before` keeps a flowing stream's timer from firing more than once per flush
        interval: the flow itself takes the checkpoint when it falls due.

        Exact, not early: a deadline at the interval's end while the stream flows with too few
        events fired a timer that found nothing due and re-armed it. (Most of the relay's timer
        wakeups that find nothing due are not these but the patch timer outliving a flush that a
        chunk made: at 100 streams x 30 deltas/s, 310-375 a second with this, 350-400 without,
        of about 1,350 patches; cheap either way, about a microsecond per delta.)"""
        if not self._dirty:
            return None
        at = self._last + self.interval
        if self._interval_commits and self._events < self.min_events and self._last_change is not None:
            # Without more events only the quiet moment or the max interval can make it due.
            at = max(at, min(self._last_change + self.interval, self._last + self.max_interval))
        if at <= now:
            at = now + not_before
        return at

    def committed(self, now: float, *, interval: bool) -> None:
        """A checkpoint was captured now (`interval`: by this policy's interval rule); when the writer
        commits it is the caller's concern."""
        self._last = now
        self._events = 0
        self._dirty = False
        self._interval_commits += interval

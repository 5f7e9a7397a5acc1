"""When the relay sends a patch and when it commits a checkpoint: two pure policies.

Time is an argument (the caller's loop time in production, plain numbers in tests), like zulip's
event queue passes `now`; nothing here reads a clock, sleeps or sets a timer. The relay asks
`push(...)` after every chunk whether to act now, and arms one timer for `next_deadline()`.

FlushPolicy (patches to viewers): leading edge, then throttled. A change after a quiet interval
(since the last flush, or since the last change) goes out at once; a steady flow goes out at most
once per interval; a boundary (a part, item or response ended) goes out at once. The interval is
the setting times `scale`, which the relay's pacer raises while the process is short of CPU.

CheckpointPolicy (commits): at boundaries (the caller says so), and while text flows: no sooner
than `interval` after the last one; then once `min_events` events have come, the stream has gone
quiet (no change for an interval), or `max_interval` has passed; the very first one as soon as
the interval allows, so a reload early in an answer already shows text. A fast answer is
committed every `interval`, a slow one every `min_events` or `max_interval`: a 2,000-delta answer
costs a few dozen writes at 30 deltas/s as at 200.

Pure: no Django, no I/O.
"""

from __future__ import annotations


class FlushPolicy:
    __slots__ = ("base_interval", "scale", "_last_flush", "_last_change", "_pending")

    def __init__(self, interval: float) -> None:
        if interval < 0:
            raise ValueError(f"interval must not be negative, got {interval}")
        self.base_interval = interval
        self.scale = 1.0  # set by the pacer: > 1 while the process is behind
        self._last_flush: float | None = None
        self._last_change: float | None = None
        self._pending = False

    @property
    def interval(self) -> float:
        return self.base_interval * self.scale

    def push(self, now: float, *, changed: bool, boundary: bool = False) -> bool:
        """Record a chunk's effect; True when the caller should flush now."""
        interval = self.interval
        quiet = (self._last_flush is None or now - self._last_flush >= interval
                 or self._last_change is None or now - self._last_change >= interval)
        if changed:
            self._last_change = now
            self._pending = True
        return boundary or quiet

    def due(self, now: float) -> bool:
        deadline = self.next_deadline()
        return deadline is not None and now >= deadline

    def next_deadline(self) -> float | None:
        """When pending changes must go out without another chunk; None with nothing pending."""
        if not self._pending:
            return None
        return (self._last_flush if self._last_flush is not None else float("-inf")) + self.interval

    def flushed(self, now: float, *, sent: bool) -> None:
        """The caller flushed (`sent`: a patch went out, which starts the next interval)."""
        if sent:
            self._last_flush = now
        self._pending = False

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

    def push(self, now: float, *, events: int = 0, changed: bool = False) -> None:
        self._events += events
        if changed:
            self._last_change = now
        if events or changed:
            self._dirty = True

    @property
    def dirty(self) -> bool:
        return self._dirty

    def due(self, now: float) -> bool:
        """An interval checkpoint is due (boundaries are the caller's: it commits at once)."""
        elapsed = now - self._last
        if elapsed < self.interval or not self._dirty:
            return False
        return (not self._interval_commits  # the first text a reload shows: committed early
                or self._events >= self.min_events
                or elapsed >= self.max_interval
                or self._last_change is None or now - self._last_change >= self.interval)

    def next_deadline(self, now: float, *, not_before: float = 0.0) -> float | None:
        """The earliest moment `due` could turn true without another event (None: nothing to
        commit). `not_before` keeps a flowing stream's timer from firing more than once per
        flush interval: the flow itself takes the checkpoint when it falls due."""
        if not self._dirty:
            return None
        at = self._last + self.interval
        if at <= now:
            quiet_at = (self._last_change if self._last_change is not None else now) + self.interval
            at = max(min(quiet_at, self._last + self.max_interval), now + not_before)
        return at

    def committed(self, now: float, *, interval: bool) -> None:
        """A checkpoint was captured now (`interval`: by this policy's interval rule)."""
        self._last = now
        self._events = 0
        self._dirty = False
        self._interval_commits += interval

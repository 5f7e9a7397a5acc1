"""Errors raised by the streaming core. Each says what was wrong and where, and none loses data:
the decoder and parser raise only for the offending event, and callers keep going."""

from __future__ import annotations


class StreamError(Exception):
    """Base class for everything the streaming core raises."""


class EventTooLarge(StreamError):
    """An SSE event (or a single line) grew past the configured maximum size."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"SSE event exceeds the maximum of {limit} bytes (at least {size} buffered)")
        self.size = size
        self.limit = limit


class MalformedEvent(StreamError):
    """The data of an SSE event is not a JSON object with a string `type`."""

    def __init__(self, reason: str, data: str) -> None:
        preview = data if len(data) <= 120 else data[:117] + "..."
        super().__init__(f"malformed stream event: {reason}: {preview!r}")
        self.reason = reason
        self.data = data

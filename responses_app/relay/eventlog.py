"""The raw event log of one runner: every event since the last commit, as SSE text.

Tool payloads are redacted (RELAY_REDACT_FIELDS, see redact.py) before they are written down;
message text, item structure and every id stay, so the log replays. Batches carry the segment
they came from and their first and last sequence numbers, and go to the database with the next
checkpoint, or on their own once LOG_FLUSH_BYTES accumulate (a fast stream's memory is bounded).
"""

from __future__ import annotations

from typing import Any

import orjson

from .redact import REDACTED_TYPES, redact_event

LOG_FLUSH_BYTES = 32 * 1024  # raw events held in memory before they go to the writer on their own


class EventLog:
    __slots__ = ("redact_fields", "segment_index", "_data", "_count", "_first", "_last")

    def __init__(self, redact_fields: frozenset[str]) -> None:
        self.redact_fields = redact_fields
        self.segment_index = 0  # the segment the events being added belong to
        self._data = bytearray()  # grown in place
        self._count = 0
        self._first: int | None = None
        self._last: int | None = None

    def __len__(self) -> int:
        return len(self._data)

    def add(self, events: list[dict[str, Any]]) -> int:
        """Append the events; the bytes held now (what `len()` says)."""
        data = self._data
        if not events:
            return len(data)
        fields = self.redact_fields
        dumps = orjson.dumps
        for event in events:  # called for every chunk: no call per event but the one dumps
            if event["type"] in REDACTED_TYPES:
                event = redact_event(event, fields)
            data += b"data: "
            data += dumps(event)
            data += b"\n\n"
        self._count += len(events)
        first, last = events[0].get("sequence_number"), events[-1].get("sequence_number")
        if self._first is None and type(first) is int:
            self._first = first
        if type(last) is int:
            self._last = last
        return len(data)

    def take(self) -> dict[str, Any] | None:
        """The batch since the last take (None when empty), as the writer stores it."""
        if not self._data:
            return None
        # Bytes until the database thread decodes them: compact, whatever the text's characters.
        batch = {"segment_index": self.segment_index, "first_sequence": self._first,
                 "last_sequence": self._last, "count": self._count, "data": bytes(self._data)}
        self._data = bytearray()
        self._count = 0
        self._first = self._last = None
        return batch

"""The raw event log of one runner: every event since the last commit, as SSE text.

Each event is logged as the upstream sent its `data` (UTF-8), not re-encoded from the parsed
dict: the log is what came, and a relayed event costs one `str.encode` instead of a JSON
serialisation (bench/README.md, relay). A payload of several data lines, and an event redaction
changed, are serialised from the dict, on one line each.

Padding is never stored: a delta's `obfuscation` (random characters some providers add however
the relay asks) is dropped, and such an event serialised from the dict without it.

Tool payloads are redacted (RELAY_REDACT_FIELDS, see streaming/redact.py) and the upstream's error
messages masked before they are written down; message text, item structure and every id stay,
so the log replays. Batches carry the segment
they came from and their first and last sequence numbers, and go to the database with the next
checkpoint, or on their own once LOG_FLUSH_BYTES accumulate (a fast stream's memory is bounded).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from ..streaming.redact import REDACTED_TYPES, redact_event

LOG_FLUSH_BYTES = 32 * 1024  # raw events held in memory before they go to the writer on their own


class EventLog:
    __slots__ = ("redact_fields", "secrets", "segment_index", "_data", "_count", "_first", "_last")

    def __init__(self, redact_fields: frozenset[str], secrets: tuple[str, ...] = ()) -> None:
        self.redact_fields = redact_fields
        self.secrets = secrets  # masked in the upstream's error messages (streaming/redact.py)
        self.segment_index = 0  # the segment the events being added belong to
        # Grown in place, not a list of each event's bytes framed at `take`: the list saves a few
        # appends an event, but its small objects fragment pymalloc's arenas, and every in-flight
        # stream's memory grows (bench/README.md, storage).
        self._data = bytearray()
        self._count = 0
        self._first: int | None = None
        self._last: int | None = None

    def __len__(self) -> int:
        return len(self._data)

    def add(self, events: list[dict[str, Any]], raw: Sequence[str] = ()) -> int:
        """Append the events (`raw`: their payloads as they came, when known); the bytes held now
        (what `len()` says)."""
        data = self._data
        if not events:
            return len(data)
        fields, secrets = self.redact_fields, self.secrets
        exact = len(raw) == len(events)
        for index, event in enumerate(events):  # called for every chunk: one encode per event
            logged = redact_event(event, fields, secrets) if event["type"] in REDACTED_TYPES else event
            if "obfuscation" in logged:
                logged = {key: value for key, value in logged.items() if key != "obfuscation"}
            if logged is event and exact and "\n" not in (text := raw[index]):
                payload = text.encode()
            else:  # redacted or unpadded (a copy), or a payload of several data lines, or not known
                payload = orjson.dumps(logged)
            data += b"data: "
            data += payload
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
        # Bytes until the database thread compresses them: compact, whatever the text's characters.
        # The buffer itself, not a copy: a stream's log is the largest block it churns, and a copy
        # per take doubled that churn in the allocator's heap (RSS per in-flight stream).
        batch = {"segment_index": self.segment_index, "first_sequence": self._first,
                 "last_sequence": self._last, "count": self._count, "data": self._data}
        self._data = bytearray()
        self._count = 0
        self._first = self._last = None
        return batch

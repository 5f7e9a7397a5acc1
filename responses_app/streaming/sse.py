"""Incremental Server-Sent Events decoder.

Implements the event stream interpretation of the WHATWG HTML standard:
https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation

Contract:

* ``SSEDecoder.decode(chunk)`` takes the raw bytes of a ``text/event-stream`` body in pieces of
  any size, split anywhere (inside a CRLF, a UTF-8 character or the leading BOM), and returns the
  events that piece completes, in stream order. Any chunking of a stream yields the same events.
* ``SSEDecoder.flush()`` marks the end of the stream. As the spec requires, an event not
  terminated by a blank line is discarded, never dispatched. The decoder is then reset for a new
  stream (a reconnection); ``last_event_id`` is kept, for the ``Last-Event-ID`` request header.
* Text is UTF-8; invalid bytes become U+FFFD, never an exception.
* Memory is bounded by ``max_event_bytes``. When the bytes buffered for one event (its data
  buffer, i.e. each data value plus a newline, together with any unterminated line) exceed it,
  ``decode`` raises ``EventTooLarge``; that event is dropped up to its terminating blank line and
  decoding carries on with the next one. Events the same chunk completed are not lost: the next
  ``decode`` or ``flush`` call returns them first.

Stdlib only, no I/O; one decoder per stream (not thread-safe).
"""

from __future__ import annotations

from responses_app.streaming.errors import EventTooLarge

__all__ = ["SSEDecoder", "ServerSentEvent"]

_BOM = b"\xef\xbb\xbf"


class ServerSentEvent:
    """One dispatched event: its type, data, the last event ID and this block's retry value."""

    __slots__ = ("event", "data", "id", "retry")

    event: str
    data: str
    id: str
    retry: int | None

    def __init__(
        self, event: str = "message", data: str = "", id: str = "", retry: int | None = None
    ) -> None:
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerSentEvent):
            return NotImplemented
        return (
            self.event == other.event
            and self.data == other.data
            and self.id == other.id
            and self.retry == other.retry
        )

    def __repr__(self) -> str:
        return (
            f"ServerSentEvent(event={self.event!r}, data={self.data!r}, id={self.id!r}, "
            f"retry={self.retry!r})"
        )


class SSEDecoder:
    """Turns the chunks of one event stream into ``ServerSentEvent`` objects (see module doc)."""

    __slots__ = (
        "last_event_id",
        "_limit",
        "_ready",
        "_at_start",
        "_head",
        "_cr",
        "_tail",
        "_skip_line",
        "_skip_event",
        "_data",
        "_size",
        "_event",
        "_retry",
    )

    last_event_id: str

    def __init__(self, max_event_bytes: int = 8 * 1024 * 1024) -> None:
        if max_event_bytes < 1:
            raise ValueError(f"max_event_bytes must be positive, got {max_event_bytes}")
        self._limit = max_event_bytes
        self.last_event_id = ""
        self._ready: list[ServerSentEvent] = []
        self._reset()

    def _reset(self) -> None:
        self._at_start = True
        self._head = b""  # a possible BOM prefix, held until enough bytes decide it
        self._cr = False  # the previous chunk ended with CR
        self._tail: bytes | bytearray = b""  # the unterminated last line
        self._skip_line = False  # the unterminated line overflowed: drop it up to its line end
        self._skip_event = False  # the event overflowed: drop it up to its blank line
        self._data: list[bytes] = []
        self._size = 0  # length of the spec's data buffer: each value plus its newline
        self._event = "message"
        self._retry: int | None = None

    def decode(self, chunk: bytes) -> list[ServerSentEvent]:
        """Feed the next bytes of the stream; return the events they complete."""
        out = self._ready
        if out:
            self._ready = []
        else:
            out = []

        if self._at_start:
            if self._head:
                chunk = self._head + chunk
                self._head = b""
            if len(chunk) < 3 and _BOM.startswith(chunk):
                self._head = chunk
                return out
            self._at_start = False
            # The spec decodes with "UTF-8 decode", which strips one leading BOM and no other.
            if chunk[:3] == _BOM:
                chunk = chunk[3:]

        if self._cr:
            if not chunk:
                return out
            self._cr = False
            # CRLF split across chunks: the CR already ended the line, so this LF ends nothing.
            if chunk[0] == 10:
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._cr = chunk[-1] == 13
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

        if b"\n" not in chunk:
            if chunk:
                self._hold(chunk, out)
            return out

        lines = chunk.split(b"\n")
        rest = lines.pop()
        if self._skip_line:
            self._skip_line = False
            # The end of an oversized line: turned into a comment so the loop ignores it.
            lines[0] = b":"
        elif self._tail:
            lines[0] = b"".join((self._tail, lines[0]))
            self._tail = b""

        max_bytes = self._limit
        # -1 while dropping an oversized event: every data line then takes the overflow branch.
        limit = -1 if self._skip_event else max_bytes
        data = self._data
        size = self._size
        event = self._event
        retry = self._retry
        last_id = self.last_event_id
        error: EventTooLarge | None = None
        new_event = ServerSentEvent

        for line in lines:
            if not line:
                # Spec: with an empty data buffer, a blank line dispatches nothing.
                if data:
                    if len(data) == 1:
                        text = data[0].decode("utf-8", "replace")
                    else:
                        text = b"\n".join(data).decode("utf-8", "replace")
                    out.append(new_event(event, text, last_id, retry))
                    data = []
                # The buffers reset whether or not an event was dispatched.
                event = "message"
                retry = None
                size = 0
                limit = max_bytes
            elif line[:6] == b"data: ":
                size += len(line) - 5
                if size > limit:
                    if limit >= 0:
                        error = error or EventTooLarge(size, limit)
                        data = []
                        limit = -1
                    continue
                data.append(line[6:])
            elif line[:7] == b"event: ":
                # An empty event type buffer means "message" at dispatch.
                event = line[7:].decode("utf-8", "replace") or "message"
            elif line[0] == 58:  # b":" starts a comment
                continue
            else:
                # No colon: the whole line is the field name and the value is empty.
                name, colon, value = line.partition(b":")
                # Only the first space after the colon is syntax; any further ones are value.
                if colon and value[:1] == b" ":
                    value = value[1:]
                if name == b"data":
                    size += len(value) + 1
                    if size > limit:
                        if limit >= 0:
                            error = error or EventTooLarge(size, limit)
                            data = []
                            limit = -1
                        continue
                    data.append(value)
                elif name == b"event":
                    event = value.decode("utf-8", "replace") or "message"
                elif name == b"id":
                    # An id containing NULL is ignored as a whole, not truncated.
                    if b"\x00" not in value:
                        last_id = value.decode("utf-8", "replace")
                elif name == b"retry":
                    # bytes.isdigit() is ASCII-only, which is exactly the spec's test.
                    if value.isdigit():
                        try:
                            retry = int(value)
                        except ValueError:
                            pass  # past int()'s digit limit: no usable delay
                # The spec ignores any other field name.

        self._data = data
        self._size = size
        self._event = event
        self._retry = retry
        self.last_event_id = last_id
        self._skip_event = limit < 0
        if error is not None:
            # Not held through _hold: a second error here would mask the first.
            self._tail = rest
            self._ready = out
            raise error
        if rest:
            self._hold(rest, out)
        return out

    def _hold(self, piece: bytes, out: list[ServerSentEvent]) -> None:
        """Append ``piece`` to the unterminated line, enforcing the size limit."""
        if self._skip_line:
            return
        tail = self._tail
        if not tail:
            tail = piece
        elif type(tail) is bytes:
            # Grown in place from the second piece on (amortised linear), so that a line fed
            # byte by byte is never re-joined per byte, and costs one byte of memory per byte.
            tail = bytearray(tail)
            tail += piece
        else:
            tail += piece
        self._tail = tail
        size = len(tail) + (0 if self._skip_event else self._size)
        if size > self._limit:
            self._tail = b""
            self._skip_line = True
            self._skip_event = True
            self._data = []
            self._size = 0
            self._ready = out
            raise EventTooLarge(size, self._limit)

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: discard any unterminated event and reset for a new stream."""
        out = self._ready
        self._ready = []
        self._reset()
        return out

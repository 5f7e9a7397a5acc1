"""Bytes in, assembled response and view ops out: the per-event path the relay and replay share.

    chunk ─▶ SSEDecoder ─▶ parse_event ─▶ Assembler (+ ViewModel ops)
    event ─────────────────▶ parse_event ─▶ Assembler    (WebSocket mode: one JSON per frame)

Bad input never stops the stream: an oversized or malformed event is counted, described in
`problems` (bounded) and skipped; everything around it is still applied.

The end of a stream (`finish`) has one rule, for the live relay and for replay alike: the
decoder's last complete events are applied (an unterminated one is dropped, as the SSE spec
says), and the events held behind a sequence gap are applied, each gap given up on and counted:
what arrived is shown, never lost because its predecessor did not come. One exception, asked for
with `hold=True` by a caller that will resume the stream: a resume starts before the gap and
fills it, so the held events wait for it (a terminal one still ends the response now); the relay
releases them when it ends the request instead (Transcript.end).

`data: [DONE]` (LiteLLM and chat-completions style servers send it last) is the end of the
stream, not an event: skipped, never counted as malformed, however the bytes were split.
Pure: no Django, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from .assembler import Applied, Assembler
from .errors import EventTooLarge, MalformedEvent
from .events import parse_event
from .sse import ServerSentEvent, SSEDecoder

MAX_PROBLEMS = 50
DONE_MARKER = "[DONE]"


@dataclass(frozen=True)
class Problem:
    kind: str  # "malformed" | "oversized"
    message: str
    data: str  # the offending payload (truncated), so nothing is silently lost


class Fed(NamedTuple):
    events: list[dict[str, Any]]  # the parsed events, in arrival order (for the raw event log)
    applied: Applied  # what they did
    raw: list[str]  # each event's `data` as it came, parallel to `events`


class StreamPipeline:
    def __init__(
        self,
        *,
        max_event_bytes: int = 8 * 1024 * 1024,
        hold_window: int = 8,
        starting_after: int | None = None,
        assembler: Assembler | None = None,
    ) -> None:
        self.decoder = SSEDecoder(max_event_bytes=max_event_bytes)
        self.max_event_bytes = max_event_bytes
        self.assembler = assembler or Assembler(
            hold_window=hold_window, starting_after=starting_after
        )
        self.problems: list[Problem] = []
        self.malformed = 0
        self.oversized = 0

    def feed(self, chunk: bytes) -> Fed:
        """Decode and apply one chunk."""
        try:
            messages = self.decoder.decode(chunk)
        except EventTooLarge as exc:
            self.oversized += 1
            self._problem("oversized", str(exc), "")
            # The decoder keeps the events around the oversized one for its next call: take them now.
            messages = self.decoder.decode(b"")
        return self._apply(messages)

    def feed_event(self, data: str) -> Fed:
        """Apply one event given as its JSON alone, without SSE framing (a WebSocket frame). Its
        length is counted in characters (each is at least a byte)."""
        if len(data) > self.max_event_bytes:
            self.oversized += 1
            self._problem("oversized", f"event of {len(data)} characters exceeds {self.max_event_bytes} bytes", "")
            return Fed([], self.assembler.feed_many(()), [])
        try:
            events: list[dict[str, Any]] = [parse_event(data)]  # type: ignore[list-item]
        except MalformedEvent as exc:
            if data.strip() == DONE_MARKER:
                return Fed([], self.assembler.feed_many(()), [])
            self.malformed += 1
            self._problem("malformed", str(exc), data[:2000])
            return Fed([], self.assembler.feed_many(()), [])
        return Fed(events, self.assembler.feed_many(events), [data])

    def finish(self, *, hold: bool = False) -> Fed:
        """The stream closed (see the module docstring); the decoder is ready for another.
        `hold`: a resume follows, so events held behind a gap (but a terminal one) stay held."""
        fed = self._apply(self.decoder.flush())
        assembler = self.assembler
        if not assembler.held_count or (hold and not assembler.holds_terminal):
            return fed
        return Fed(fed.events, fed.applied.then(self.assembler.release_held()), fed.raw)

    def _apply(self, messages: list[ServerSentEvent]) -> Fed:
        events: list[dict[str, Any]] = []
        raw: list[str] = []
        append = events.append
        parse = parse_event
        for message in messages:
            data = message.data
            try:
                append(parse(data))  # type: ignore[arg-type]
            except MalformedEvent as exc:
                if data.strip() == DONE_MARKER:  # the end of the stream, not an event
                    continue
                self.malformed += 1
                self._problem("malformed", str(exc), data[:2000])
                continue
            raw.append(data)
        # Parse problems never depend on assembler state, so the batch is applied in one go.
        return Fed(events, self.assembler.feed_many(events), raw)

    def _problem(self, kind: str, message: str, data: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(Problem(kind, message, data))

"""How one upstream segment ended, and why the relay ended a request itself, as values (never a
string to match on)."""

from __future__ import annotations

import enum
import socket
import ssl
from dataclasses import dataclass

import aiohttp
import httpx

from ..upstream.credentials import masked
from ..upstream.http import UpstreamHTTPError


class Ending(enum.Enum):
    # How one upstream segment ended.
    TERMINAL = "terminal"  # the response reached a terminal event
    DROPPED = "dropped"  # the connection closed or failed without one
    STALLED = "stalled"  # no bytes at all for RELAY_IDLE_TIMEOUT_S (the reader is stopped for it)
    CANCELLED = "cancelled"  # the explicit Stop
    HTTP_ERROR = "http_error"  # the upstream answered the request with an error status
    RESTORED = "restored"  # no segment: a runner that took over rebuilt the view from the event log
    # Why the relay ends a request itself (`Stopped`), least grave first.
    STOPPED_WAITING = "stopped_waiting"  # Stop while an approval was awaited: cancelled
    DEADLINE = "deadline"  # RELAY_REQUEST_DEADLINE_S: incomplete (deadline)
    OVER_LIMIT = "max_output_items"  # RELAY_MAX_OUTPUT_ITEMS: incomplete (max_output_items)
    OVER_SIZE = "max_answer_chars"  # RELAY_MAX_ANSWER_CHARS: incomplete (max_answer_chars)
    FILTERED = "content_filter"  # the safety policy flagged its output: incomplete (content_filter)
    WRITE_FAILED = "checkpoint_failed"  # the database refused its rows for good: error
    HANDED_OFF = "handed_off"  # its process is stopping: commit, release the lease, another resumes it
    ABANDONED = "abandoned"  # another runner took it over: this one writes nothing more


# The gravest reason to stop a request stands: a request the relay cannot store ends `error`
# whatever else happened; one another runner holds is never written by this one at all.
_GRAVITY = {ending: rank for rank, ending in enumerate((
    Ending.STALLED, Ending.STOPPED_WAITING, Ending.DEADLINE, Ending.OVER_LIMIT, Ending.OVER_SIZE,
    Ending.FILTERED, Ending.WRITE_FAILED, Ending.HANDED_OFF, Ending.ABANDONED))}

LET_GO = (Ending.HANDED_OFF, Ending.ABANDONED)  # the runner let its request go: a lost lease is no news


@dataclass(frozen=True, slots=True)
class Stopped:
    """Why the relay stops a request before its response decides (the runner's one ending)."""

    ending: Ending
    error: tuple[str, str] | None = None  # (code, message) the request's error then says

    def __post_init__(self) -> None:
        if self.ending not in _GRAVITY:
            raise ValueError(f"{self.ending} is how a segment ends, not why a request stops")

    def graver_than(self, other: Stopped | None) -> bool:
        return other is None or _GRAVITY[self.ending] > _GRAVITY[other.ending]


@dataclass(frozen=True)
class SegmentResult:
    ending: Ending
    detail: str = ""
    http: UpstreamHTTPError | None = None
    never_sent: bool = False  # the connection failed before the request left: nothing can have run
    code: str = ""  # for a connection failure: what kind

    @property
    def http_status(self) -> int | None:
        return self.http.status if self.http is not None else None

    def outcome(self, status: str | None) -> str:
        """The segment's outcome as the audit shows it: the response status when it ended."""
        if self.ending is Ending.TERMINAL and status:
            return status
        if self.http is not None:
            return f"http_{self.http.status}"
        return self.ending.value


_HTTP_KINDS = {
    401: ("upstream_unauthorized", "The model provider refused the server's API key"),
    403: ("upstream_forbidden", "The model provider does not allow this request"),
    404: ("upstream_not_found", "The model provider has no such model or endpoint"),
    429: ("rate_limited", "The model provider is rate limiting this server; try again in a moment"),
}


def describe_http_error(error: UpstreamHTTPError) -> tuple[str, str]:
    """(code, message) for a request the upstream refused, as people read it in the page."""
    code, sentence = describe_http_status(error.status)
    detail = f": {error.message}" if error.message else ""
    return error.provider_code or code, f"{sentence}{detail}"


def describe_http_status(status: int) -> tuple[str, str]:
    code, sentence = _HTTP_KINDS.get(status, ("", ""))
    if not code:
        code, sentence = (("upstream_unavailable", "The model provider is unavailable") if status >= 500
                          else ("upstream_rejected", "The model provider rejected the request"))
    return code, f"{sentence} (HTTP {status})"


def connection_failure(exc: BaseException, base: str) -> SegmentResult:
    """A transport failure, told apart by whether the request can have reached the upstream.

    httpx raises ConnectError only while connecting (refused, DNS, TLS); httpx-aiohttp maps
    aiohttp's connector errors to ConnectTimeout instead, so the cause is what tells. Then the
    request never left, and the outcome is certain. Anything later (a reset, a read error) may
    follow a request the upstream acted on."""
    detail = masked(f"{type(exc).__name__}: {exc}")
    chain = _causes(exc)
    connecting = isinstance(exc, httpx.ConnectError) or any(
        isinstance(e, aiohttp.ClientConnectorError) for e in chain)
    if not connecting:
        return SegmentResult(Ending.DROPPED, detail)
    text = detail.lower()
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "refused" in text:
        code, what = "upstream_refused", "the connection was refused"
    elif any(isinstance(e, socket.gaierror) for e in chain) or "name or service not known" in text \
            or "name resolution" in text:
        code, what = "upstream_dns", "its host name does not resolve"
    elif any(isinstance(e, ssl.SSLError | ssl.CertificateError | aiohttp.ClientSSLError) for e in chain) \
            or "certificate verify" in text:
        code, what = "upstream_tls", "the TLS handshake failed"
    else:
        code, what = "upstream_unreachable", "it could not be reached"
    message = masked(f"Could not connect to the model provider at {base}: {what} ({detail}). Nothing was sent.")
    return SegmentResult(Ending.DROPPED, message, never_sent=True, code=code)


def _causes(exc: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain

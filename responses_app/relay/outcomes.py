"""How one upstream segment ended, as a value (never a string to match on)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..upstream import UpstreamHTTPError


class Ending(enum.Enum):
    TERMINAL = "terminal"  # the response reached a terminal event
    DROPPED = "dropped"  # the connection closed or failed without one
    STALLED = "stalled"  # no bytes at all for RELAY_IDLE_TIMEOUT_S
    CANCELLED = "cancelled"  # the explicit Stop
    HTTP_ERROR = "http_error"  # the upstream answered the request with an error status


@dataclass(frozen=True)
class SegmentResult:
    ending: Ending
    detail: str = ""
    http: UpstreamHTTPError | None = None

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

"""Signals a host connects to for its own billing, notifications or audit.

    request_started(sender=ResponseRequest, request)         a logical request was created, once
    request_finished(sender=ResponseRequest, request, status, usage)
                                                               it ended (completed, failed, incomplete,
                                                               error, cancelled or unknown), once
    tool_called(sender=ResponseRequest, request_id, call_id, name, arguments, output, ok)
                                                               a function tool ran, once per call id

Each is sent once per event however many tabs, reconnects, takeovers or retries there were,
from the one place that makes it happen (the submit door, the guarded terminal transition, the
tool's claim). `request_finished` and `tool_called` are sent from the relay's database threads:
keep receivers short (hand slow work to a queue). A receiver that raises is logged, never
allowed to break the relay (`send_robust`).
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger(__name__)

request_started = Signal()
request_finished = Signal()
tool_called = Signal()


def send(signal: Signal, **kwargs: Any) -> None:
    """Send to every receiver; one that raises is logged, and the others still run."""
    from .models import ResponseRequest

    for receiver, result in signal.send_robust(sender=ResponseRequest, **kwargs):
        if isinstance(result, Exception):
            logger.error("a receiver of a relay signal failed: %r", receiver, exc_info=result)

"""The product's shared vocabulary: every status and event-kind set, defined once.

The assembler, the relay, the models, the templates and (through `json_script`) the browser all
import these names; nothing else spells a status list out again.
Pure: no Django, no I/O.
"""

from __future__ import annotations

from typing import Final

# --- statuses ----------------------------------------------------------------------------------

PENDING: Final = "pending"
STREAMING: Final = "streaming"
COMPLETED: Final = "completed"
FAILED: Final = "failed"
INCOMPLETE: Final = "incomplete"
ERROR: Final = "error"
CANCELLED: Final = "cancelled"
UNKNOWN: Final = "unknown"

# Every status a logical request can be in, in the order people read them.
REQUEST_STATUSES: Final = (PENDING, STREAMING, COMPLETED, FAILED, INCOMPLETE, ERROR, CANCELLED, UNKNOWN)

# Statuses the upstream's own Response can end in (and `error`, a transport-level error event).
TERMINAL_STATUSES: Final = frozenset({COMPLETED, FAILED, INCOMPLETE, ERROR, CANCELLED})

# A request in one of these has an outcome (`unknown` until reconciled is an outcome too: the
# runner has stopped and nobody streams any more).
ENDED_STATUSES: Final = TERMINAL_STATUSES | {UNKNOWN}

# A Response object's `status` values that end it (GET /responses/{id}, cancel's answer).
RESPONSE_FINAL_STATUSES: Final = frozenset({COMPLETED, FAILED, INCOMPLETE, CANCELLED})

# --- event kinds -------------------------------------------------------------------------------

TERMINAL_EVENTS: Final = {
    "response.completed": COMPLETED,
    "response.failed": FAILED,
    "response.incomplete": INCOMPLETE,
}
TERMINAL_EVENT_BY_STATUS: Final = {status: event for event, status in TERMINAL_EVENTS.items()}

# Output item types that are not tool calls.
NON_TOOL_ITEM_TYPES: Final = frozenset({"message", "reasoning"})

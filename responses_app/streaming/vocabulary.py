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
# The error code of a request whose input the precheck flagged: nothing was sent upstream.
INPUT_FLAGGED: Final = "input_flagged"

REQUEST_STATUSES: Final[tuple[str, ...]] = (
    PENDING, STREAMING, COMPLETED, FAILED, INCOMPLETE, ERROR, CANCELLED, UNKNOWN)

# Statuses the upstream's own Response can end in (and `error`, a transport-level error event).
TERMINAL_STATUSES: Final[frozenset[str]] = frozenset({COMPLETED, FAILED, INCOMPLETE, ERROR, CANCELLED})

# A request in one of these has an outcome (`unknown` until reconciled is an outcome too: the
# runner has stopped and nobody streams any more).
ENDED_STATUSES: Final[frozenset[str]] = TERMINAL_STATUSES | {UNKNOWN}

# A Response object's `status` values that end it (GET /responses/{id}, cancel's answer).
RESPONSE_FINAL_STATUSES: Final[frozenset[str]] = frozenset({COMPLETED, FAILED, INCOMPLETE, CANCELLED})

# --- event kinds -------------------------------------------------------------------------------

TERMINAL_EVENTS: Final = {
    "response.completed": COMPLETED,
    "response.failed": FAILED,
    "response.incomplete": INCOMPLETE,
}
TERMINAL_EVENT_BY_STATUS: Final = {status: event for event, status in TERMINAL_EVENTS.items()}

# Output item types that are not tool calls.
NON_TOOL_ITEM_TYPES: Final[frozenset[str]] = frozenset({"message", "reasoning", "compaction"})

# Events after which the relay sends what it holds and commits a checkpoint: a content part, an
# item or the response itself ended (`error` included: it may be the last thing a stream says).
BOUNDARY_EVENT_TYPES: Final[frozenset[str]] = frozenset({
    "response.content_part.done", "response.output_item.done", "response.reasoning_summary_part.done",
    *TERMINAL_EVENTS, "error",
})

# Answer text a person reads: the first of these is the time to first token.
ANSWER_TEXT_DELTAS: Final[frozenset[str]] = frozenset({"response.output_text.delta", "response.refusal.delta"})

# Text deltas of a content part (reasoning text too): the assembler's hot path.
PART_TEXT_DELTAS: Final[frozenset[str]] = ANSWER_TEXT_DELTAS | {"response.reasoning_text.delta"}


def is_tool_event(event_type: str, item_type: object = None) -> bool:
    """An event about a tool call: a tool item added (`item_type`), or any `*_call*` event."""
    if event_type == "response.output_item.added":
        return isinstance(item_type, str) and item_type not in NON_TOOL_ITEM_TYPES
    return "_call" in event_type

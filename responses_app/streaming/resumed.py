"""What a view rebuilt from the raw event log takes back from the committed view.

The log holds tool payloads redacted (redact.py) and never holds what the runner itself
set on a tool block (its run's state and output): a view rebuilt from it alone differs from the
one the viewers were sent, at the same revision. A block both hold keeps the committed value of
a field the log lost (missing there, or redacted), and the runner's own state; everything else
is the log's, which may be newer than the last commit (a runner that died). Pure: no Django.
"""

from __future__ import annotations

from typing import Any

from .redact import REDACTED
from .view import ViewModel

RUNNER_STATES = frozenset({"running", "done", "awaiting_approval", "approved", "denied"})
_OWN = frozenset({"id", "kind", "text"})


def holds_redacted(value: Any) -> bool:
    """Whether `value` (a field of a view block, or a tool call's arguments) lost anything to
    redaction."""
    if isinstance(value, str):
        return value == REDACTED
    if isinstance(value, list):
        return any(holds_redacted(v) for v in value)
    if isinstance(value, dict):
        return any(holds_redacted(v) for v in value.values())
    return False


def committed_arguments(call: dict[str, Any], view: ViewModel, block_id: str | None) -> dict[str, Any]:
    """A function call rebuilt from the log, with the arguments its block in `view` holds when the
    log's are redacted and the block's (the committed view's, by keep_committed) are not."""
    if not holds_redacted(call.get("arguments")) or not block_id or not view.has(block_id):
        return call
    kept = view.block(block_id).get("arguments")
    return {**call, "arguments": kept} if isinstance(kept, str) and not holds_redacted(kept) else call


def keep_committed(view: ViewModel, committed: dict[str, Any] | None) -> None:
    """Give `view` (rebuilt from the log) back what the log lost of `committed`'s blocks."""
    for block in (committed or {}).get("blocks", ()):
        block_id = block.get("id")
        if not isinstance(block_id, str) or not view.has(block_id) or block.get("kind") != "tool":
            continue
        rebuilt = view.block(block_id)
        fields = {key: value for key, value in block.items() if key not in _OWN and (
            key not in rebuilt or (holds_redacted(rebuilt[key]) and not holds_redacted(value)))}
        if block.get("state") in RUNNER_STATES and rebuilt.get("state") not in RUNNER_STATES:
            fields["state"] = block["state"]
        if fields:
            view.set(block_id, fields)

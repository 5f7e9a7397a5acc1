"""The websocket wire format, protocol 2: how a patch travels to a tab, and how a client reads it.

As an object (`{"type":"patch","base":..,"revision":..,"ops":[["append","<block id>","<5
characters>"]]}`) a patch's envelope, not its text, was most of the traffic (bench/README.md,
wire). So a patch is a JSON array, and the commonest op, text appended to the last block, is the
text alone:

    [r1, n, op, op, ...]      the patch from revision r1 - n to r1 (n > 0: the ops it stands for,
                              before the coalescer merged adjacent appends)
    "text"                    text appended to the view's last block
    ["append", id, text]      text appended to another block
    ["add", block] ["set", id, fields] ["meta", fields]      as in view.py

Every other message stays a JSON object with a `type` (`snapshot`, `terminal`, `ping`, ...): a
client tells a patch from them by the array. `decode` turns a frame back into the message dict
`view.apply_patch` takes, shorthand ops included (`apply_op` reads them), so tests and other
processes apply frames with the one reducer; follower.js/wire.js read the same format.

PROTOCOL is named by the client (`?v=2` on the socket's URL) and echoed in every snapshot: a tab
that names another version gets snapshots only, and a tab whose own version differs from a
snapshot's reloads (see viewers/cursor.py and follower.js). Pure: no Django, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from .view import Op

PROTOCOL = 2


class WireError(ValueError):
    """A frame that is not a message of this protocol."""


def encode_patch(patch: dict[str, Any], order: Sequence[str] | None) -> bytes:
    """The frame of a patch. `order`: the view's block ids in order *at the patch's revision*
    (None when the caller cannot vouch for that: then every op names its block)."""
    base, revision, ops = patch["base"], patch["revision"], patch["ops"]
    last = _last_at_base(ops, order)
    frame: list[Any] = [revision, revision - base]
    for op in ops:
        kind = op[0]
        if kind == "append" and op[1] == last and last is not None:
            frame.append(op[2])
            continue
        if kind == "add":
            after = op[1].get("after")
            # A new block is the last one from here on, unless it was placed after an earlier
            # block (the safety notice): then every later append names its block.
            last = op[1]["id"] if after is None or after == last else None
        frame.append(op)
    return orjson.dumps(frame)


def _last_at_base(ops: list[Op], order: Sequence[str] | None) -> str | None:
    # Blocks are appended (ViewModel.add turns a known id into a `set`), so the patch's adds are
    # the last ids of `order` and the block before them was last at its base; a block placed
    # `after` another one breaks that, and then no append is abbreviated.
    if not order:
        return None
    added = 0
    for op in ops:  # one pass, no generator: once per patch
        if op[0] == "add":
            if "after" in op[1]:
                return None
            added += 1
    return order[-added - 1] if len(order) > added else None


def decode(frame: str | bytes | bytearray | memoryview) -> dict[str, Any]:
    """A frame as a message dict; a patch as {"type": "patch", "base", "revision", "ops"}."""
    try:
        message = orjson.loads(frame)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"not JSON: {exc}") from None
    if isinstance(message, dict):
        if not isinstance(message.get("type"), str):
            raise WireError("a message object without a type")
        return message
    if (isinstance(message, list) and len(message) >= 2 and all(
            isinstance(n, int) and not isinstance(n, bool) for n in message[:2]) and message[1] > 0):
        revision, count = message[0], message[1]
        ops = message[2:]
        for op in ops:
            if not isinstance(op, str) and not (isinstance(op, list) and op and isinstance(op[0], str)):
                raise WireError(f"not an op: {op!r}"[:200])
        return {"type": "patch", "base": revision - count, "revision": revision, "ops": ops}
    raise WireError(f"not a message of protocol {PROTOCOL}: {str(message)[:80]!r}")


def appended(ops: list[Any]) -> list[str]:
    """The texts a decoded patch's ops append, shorthand or named (for readers that time text)."""
    return [op if isinstance(op, str) else op[2] for op in ops if isinstance(op, str) or op[0] == "append"]

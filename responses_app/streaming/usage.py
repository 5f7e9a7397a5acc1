"""The token usage of a logical request: each response's own, summed over its responses.

A response that ended with no usage (Stop, the relay's deadline or bound, a lost connection) was
billed all the same for what it generated: it counts the output it streamed, estimated from its
characters and marked `"estimated": true`, so a conversation's total and the analytics do not
under-report a stopped answer. The input it was sent is not estimated (its context may be a whole
chain the relay never saw): that is left out, and the page says "estimated". Pure: no Django.
"""

from __future__ import annotations

from typing import Any

from .view import ViewModel

USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens")
CHARS_PER_TOKEN = 4  # OpenAI's rule of thumb for English text ("about 4 characters a token")
_GENERATED_FIELDS = ("arguments", "input", "code")  # a tool block's text the model wrote


class Usage:
    """Counts the responses of one request as they end (`response_ended`), and gives the whole."""

    __slots__ = ("_total", "_counted", "_blocks_before")

    def __init__(self) -> None:
        self._total: dict[str, Any] = {}
        self._counted: Any = None  # the usage object of the last response counted (it stays in meta)
        self._blocks_before: frozenset[str] = frozenset()  # the blocks of the responses counted

    def response_ended(self, view: ViewModel) -> None:
        """The response in progress is over (a continuation follows): count it."""
        _add(self._total, self._of_current(view))
        self._counted = view.meta.get("usage")
        self._blocks_before = frozenset(view.order())

    def of_request(self, view: ViewModel) -> Any:
        """One response: its usage exactly as reported (or estimated); several: the sums."""
        current = self._of_current(view)
        if not self._total:
            return current
        total = dict(self._total)
        _add(total, current)
        return total

    def _of_current(self, view: ViewModel) -> Any:
        usage = view.meta.get("usage")
        if isinstance(usage, dict) and usage is not self._counted:
            return usage
        before = self._blocks_before
        chars = sum(_generated_chars(view, block_id) for block_id in view.order() if block_id not in before)
        if not chars:
            return None
        tokens = -(-chars // CHARS_PER_TOKEN)
        return {"output_tokens": tokens, "total_tokens": tokens, "estimated": True}


def _generated_chars(view: ViewModel, block_id: str) -> int:
    block = view.block(block_id)
    if block.get("kind") != "tool":
        return len(view.text(block_id))
    return sum(len(value) for field in _GENERATED_FIELDS if isinstance(value := block.get(field), str))


def _add(total: dict[str, Any], usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    for key in USAGE_KEYS:
        if isinstance(usage.get(key), int):
            total[key] = total.get(key, 0) + usage[key]
    if usage.get("estimated"):
        total["estimated"] = True

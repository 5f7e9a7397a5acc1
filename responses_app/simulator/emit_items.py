"""The emitter's base: ids, output indexes, padding and the item events every item kind shares.

Every generator yields `(event, cost)` steps: the event without its final sequence number (a
placeholder keeps the key in second position, as on the wire) and its pacing cost in tokens.
The emitter records each item's `.done` state in `output`: the terminal Response's output.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from typing import Any

Event = dict[str, Any]
Emission = tuple[Event, int]

# Padding for streamed deltas (`obfuscation`, as the API sends unless
# `stream_options.include_obfuscation` is false): a window into this string, so seeded streams stay
# byte-identical.
_OBF = "x7Qm2LpZ9aKd4VwRt6YbN3sHc8GfJ1uE5oMiPqXzTnW0eBvDkyAhSgCrUjLF"


class ItemEmitter:
    def __init__(
        self,
        rng: random.Random,
        *,
        obfuscation: bool = True,
        top_logprobs: int | None = None,
        id_length: int | None = None,
    ) -> None:
        self.rng = rng
        self.id_length = id_length
        self._shared = f"{rng.getrandbits(64):016x}"
        self.obfuscation = obfuscation
        self.top_logprobs = top_logprobs
        self.output: list[dict[str, Any]] = []
        self.output_tokens = 0
        self.reasoning_tokens = 0
        self._next_index = 0
        self._obf_pos = 0

    # --- ids ------------------------------------------------------------------------------
    def new_id(self, prefix: str) -> str:
        # Real ids of one response share a middle part; the tail is unique per item.
        return self._long(f"{prefix}_{self._shared}{self.rng.getrandbits(136):034x}")

    def unseeded_id(self, prefix: str) -> str:
        """An id like new_id's from the system's randomness, leaving the seeded sequence as it was."""
        return self._long(f"{prefix}_{self._shared}{secrets.randbits(136):034x}")

    def _long(self, short: str) -> str:
        """`sim.id_length`: the id made this long, with hex derived from it (the rng untouched)."""
        if self.id_length is None or len(short) >= self.id_length:
            return short
        tail: list[str] = []
        block = short.encode()
        while len(short) + sum(map(len, tail)) < self.id_length:
            block = hashlib.sha256(block).hexdigest().encode()
            tail.append(block.decode())
        return (short + "".join(tail))[: self.id_length]

    def call_id(self) -> str:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return self._long("call_" + "".join(self.rng.choice(alphabet) for _ in range(24)))

    def _index(self) -> int:
        index = self._next_index
        self._next_index += 1
        return index

    def _obf(self, delta: str) -> str:
        size = max(2, 16 - len(delta))
        pos = self._obf_pos
        self._obf_pos = (pos + 7) % (len(_OBF) - 16)
        return _OBF[pos : pos + size]

    def _done(self, index: int, item: dict[str, Any]) -> Emission:
        self.output.append(item)
        return (
            {
                "type": "response.output_item.done",
                "sequence_number": 0,
                "output_index": index,
                "item": item,
            },
            0,
        )

    def _added(self, index: int, item: dict[str, Any]) -> Emission:
        return (
            {
                "type": "response.output_item.added",
                "sequence_number": 0,
                "output_index": index,
                "item": item,
            },
            0,
        )

    def _simple(self, kind: str, item_id: str, index: int, cost: int = 0) -> Emission:
        return (
            {"type": kind, "sequence_number": 0, "output_index": index, "item_id": item_id},
            cost,
        )

    def _logprobs(self, token: str) -> list[dict[str, Any]]:
        rng = self.rng
        tops = [
            {
                "token": alt,
                "logprob": round(-1.5 - rng.random() * 6, 6),
                "bytes": list(alt.encode()),
            }
            for alt in (token.upper(), token.strip() or "_", token + "s")[: self.top_logprobs or 0]
        ]
        return [
            {
                "token": token,
                "logprob": round(-rng.random() * 0.5, 6),
                "bytes": list(token.encode()),
                "top_logprobs": tops,
            }
        ]

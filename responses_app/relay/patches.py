"""One request's patch stream: view ops coalesced (the core's Coalescer), timed by the core's
FlushPolicy, encoded once in the wire format (the core's wire.py), and published to every viewer
through the hub.

A viewer's first snapshot is taken at a patch boundary, never by flushing on its behalf: with
nothing pending it is the view as it stands; otherwise it is answered right after the next flush,
so the patches that follow continue exactly from its revision. Reading never publishes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ..ops.metrics import ARRIVED, PATCH_LAG_SAMPLE_S
from ..streaming.coalescer import Coalescer
from ..streaming.policies import FlushPolicy
from ..streaming.transcript import Ops
from ..streaming.view import ViewModel
from ..streaming.wire import encode_patch

Publish = Callable[[dict[str, Any], str], None]


class PatchStream:
    def __init__(self, view: ViewModel, publish: Publish, interval: float, *, max_wait: float | None = None,
                 min_chars: int = 0) -> None:
        self.view = view
        self.policy = FlushPolicy(interval, max_wait=max_wait, min_chars=min_chars)
        self._coalescer = Coalescer()
        self._publish = publish
        self._waiters: list[asyncio.Future[dict[str, Any]]] = []
        self.published = view.revision  # the revision of the last patch sent
        # The patch lag is sampled: one patch per PATCH_LAG_SAMPLE_S carries the arrival (wall clock)
        # of its oldest change, so the viewers observe a few patches a second, not every one.
        self._arrived: float | None = None
        self._sample_at = 0.0

    def push(self, change: Ops, now: float, *, boundary: bool = False) -> bool:
        """Take a change; True when it should go out now."""
        ops = change.ops
        if not ops:
            return self.policy.push(now, False, boundary, 0)
        coalescer = self._coalescer
        before = coalescer.pending_chars
        if now >= self._sample_at and self._arrived is None and not coalescer.pending:
            self._arrived = time.time()  # the first change of the patch to come: its oldest
        urgent = coalescer.push(change.base, ops, change.revision)
        return self.policy.push(now, True, boundary, coalescer.pending_chars - before) or urgent

    def flush(self, now: float) -> dict[str, Any] | None:
        """Publish what is pending; the patch sent (None: nothing was pending)."""
        patch = self._coalescer.flush()
        if patch is not None:
            message = {"type": "patch", **patch}
            # The view's order is the order at the patch only when nothing newer has happened to it.
            order = self.view.order() if self.view.revision == patch["revision"] else None
            text = encode_patch(patch, order).decode()
            if self._arrived is not None:
                message[ARRIVED], self._arrived = self._arrived, None  # not in the text: for the viewers' metric
                self._sample_at = now + PATCH_LAG_SAMPLE_S
            self._publish(message, text)
            self.published = patch["revision"]
        self.policy.flushed(now, sent=patch is not None)
        if self._waiters:
            self._answer()
        return patch

    def next_deadline(self) -> float | None:
        return self.policy.next_deadline()

    def due(self, now: float) -> bool:
        return self.policy.due(now)

    async def snapshot(self) -> dict[str, Any]:
        """The view at a patch boundary (see the module docstring)."""
        if not self._coalescer.pending:
            return self.view.to_dict()
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return await waiter

    def close(self) -> None:
        """The runner stopped: whoever still waits gets the view as it stands."""
        self._answer()

    def _answer(self) -> None:
        view = self.view.to_dict()  # once, for every waiter
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(view)

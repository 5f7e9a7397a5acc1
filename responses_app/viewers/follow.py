"""Follow one request's view from async code, in any process: the latest view at once, then each
change, then its end. What `api.subscribe` and the AG-UI and AI SDK streams are built on.

    async with Follow(request_id) as follow:
        async for update in follow:          # Update(kind, view, status, ops, revision)
            ...

The first update is a `snapshot` (`current_view`). Then a `patch` per change (`ops` as view.py
applies them; `view` already has them), and a `terminal` update last. A follower is a viewer like
a socket, with a cursor of its own (cursor.py: the same rules, constants and resync throttle):
one that falls behind (its outbox full) or sees a gap gets a fresh `snapshot` instead of the
patches it missed, never a hole; after SILENCE_S with nothing, the database says whether the
request ended meanwhile (`ended_elsewhere`: its `terminal` lost on the way).

It starts, cancels and counts nothing unless asked (`count_viewer`).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from .. import selectors, services
from ..models import ResponseRequest
from ..relay.dbthreads import ws_call
from ..relay.hub import get_hub
from ..streaming.view import apply_patch
from .cursor import IDLE, RESYNC, Cursor

ASKED_WAIT_S = 5.0  # how long an answer waits for its question to reach the view this process sees
ASKED_POLL_S = 0.25


@dataclass(frozen=True)
class Update:
    kind: str  # snapshot | patch | terminal
    revision: int
    status: str  # the request's status as last known
    view: dict[str, Any]  # the whole view at `revision` (the follower's own copy: read, do not keep mutating)
    ops: tuple[Any, ...] = ()  # a patch's ops

    @property
    def done(self) -> bool:
        return self.kind == "terminal"


class Follow:
    def __init__(self, request_id: Any, *, count_viewer: bool = False, reconnect: bool = False) -> None:
        self.request_id = str(request_id)
        self.count_viewer = count_viewer
        self.reconnect = reconnect
        self.view: dict[str, Any] = {}
        self.status = ""
        self.cursor: Cursor | None = None

    async def __aenter__(self) -> Follow:
        loop = asyncio.get_running_loop()
        self.cursor = Cursor(clock=loop.time, later=loop.call_later, wire=False)
        await get_hub().attach(self.request_id, self.cursor)  # before reading: nothing published from now on is missed
        if self.count_viewer:
            await ws_call(services.request_count)(request_id=self.request_id, viewer_connections=1,
                                                  reconnects=int(self.reconnect))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        cursor, self.cursor = self.cursor, None
        if cursor is not None:
            cursor.stop()
            get_hub().detach(self.request_id, cursor)

    def __aiter__(self) -> AsyncIterator[Update]:
        return self._updates()

    async def _updates(self) -> AsyncIterator[Update]:
        cursor = self.cursor
        if cursor is None:
            raise RuntimeError("iterate a Follow inside `async with`")
        item: Any = RESYNC  # the first update is a snapshot
        while True:
            if item is RESYNC:
                yield await self._snapshot(cursor)
                if self.status in ResponseRequest.ENDED:
                    yield self._update("terminal")
                    return
            elif item is not IDLE:
                update = self._apply(cursor, item)
                if update is not None:
                    yield update
                    if update.done:
                        return
            cursor.sent()
            cursor.watch_silence()
            item = await cursor.take()
            if item is IDLE and await ended_elsewhere(self.request_id):
                item = RESYNC  # its terminal was lost on the way: the snapshot brings it

    def _apply(self, cursor: Cursor, message: dict[str, Any]) -> Update | None:
        """A message the cursor queued: it continues this view (the cursor dropped the stale and
        resynced the gaps), or it came before the first snapshot."""
        kind = message["type"]
        if kind == "patch":
            if message["revision"] <= self.view["revision"]:
                return None
            if not apply_patch(self.view, message):
                cursor.resync_now()  # never a hole
                return None
            return self._update("patch", tuple(message["ops"]))
        if kind == "terminal":
            if message.get("revision", 0) > self.view["revision"]:
                cursor.resync_now()  # the final view first, then its end
                return None
            self.status = message["status"]
            return self._update("terminal")
        return None  # a heartbeat: the cursor has read it

    def _update(self, kind: str, ops: tuple[Any, ...] = ()) -> Update:
        return Update(kind=kind, revision=self.view["revision"], status=self.status, view=self.view, ops=ops)

    async def _snapshot(self, cursor: Cursor) -> Update:
        self.view, self.status = await current_view(self.request_id)
        cursor.snapshot_sent(self.view["revision"])
        if behind(self.request_id, self.view, self.status):
            get_hub().ask_commit(self.request_id)
            cursor.catch_up()
        return self._update("snapshot")


async def ended_elsewhere(request_id: str) -> bool:
    """No runner in this process and the database says the request ended: a viewer silent for
    SILENCE_S may have missed its `terminal` (lost between processes)."""
    if get_hub().runner(request_id) is not None:
        return False
    return await ws_call(selectors.request_status)(request_id=request_id) in ResponseRequest.ENDED


async def current_view(request_id: str, *, own_copy: bool = True) -> tuple[dict[str, Any], str]:
    """The view as it stands and the request's status: the live runner's when it is in this
    process (at a patch boundary, newer than the last commit), else the latest committed view, or
    the newer view its runner sent here when asked, with the patches this process heard since (a
    checkpoint is a patch boundary). A copy of its own unless `own_copy=False`, for a caller that
    serialises it before its next await."""
    hub = get_hub()
    runner = hub.runner(request_id)
    if runner is not None:
        view, status = await runner.live_view()
        return (copy.deepcopy(view) if own_copy else view), status
    view, status = await ws_call(_committed)(request_id)
    sent = hub.sent_view(request_id)  # what its runner sent when asked (Hub.ask_commit), if newer
    if sent is not None and sent[0]["revision"] > view["revision"] and status not in ResponseRequest.ENDED:
        view, status = copy.deepcopy(sent[0]), sent[1]
    for patch in hub.recent_patches(request_id):
        if patch["base"] == view["revision"]:
            apply_patch(view, patch)
    return view, status


def behind(request_id: str, view: dict[str, Any], status: str) -> bool:
    """The request runs elsewhere and this process heard patches newer than `view` (the committed
    view, with the patches heard that chain onto it): they do not chain, so the view is behind
    until its runner commits or sends its live view here (`Hub.ask_commit`). A tab moved here by
    a restart meets this: its first patches heard start past the last checkpoint."""
    return status not in ResponseRequest.ENDED and get_hub().heard_revision(request_id) > view["revision"]


def _committed(request_id: str) -> tuple[dict[str, Any], str]:
    request = ResponseRequest.objects.get(pk=request_id)
    return selectors.view_latest(request=request), request.status


def approvals_asked(view: dict[str, Any]) -> set[str]:
    """The MCP approval requests a view shows."""
    return {str(b.get("item_id")) for b in view.get("blocks") or () if b.get("tool") == "mcp_approval_request"}


async def asks(request_id: str, approval_ids: set[str], *, wait_s: float = ASKED_WAIT_S) -> bool:
    """Whether the request asks all these approvals. A tab shows a question as soon as it is
    published, before its checkpoint is committed: the view here is the live one (current_view).
    A process with neither the runner nor the patch sees the question once it is committed, so a
    quick answer waits for it, briefly, while the request runs and the view seen here is not yet
    waiting for approvals (once it is, it shows every question)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        view, status = await current_view(request_id, own_copy=False)
        if approval_ids <= approvals_asked(view):
            return True
        waiting = (view.get("meta") or {}).get("status") == "waiting_for_approval"
        if waiting or status in ResponseRequest.ENDED or loop.time() >= deadline:
            return False
        await asyncio.sleep(ASKED_POLL_S)

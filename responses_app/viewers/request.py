"""`RequestConsumer` at /ws/requests/<uuid>/ (and /ws/shares/<token>/requests/<uuid>/ for a share
link's viewers): one browser tab watching one logical request.

On connect: who may watch it (`selectors.request_for_viewer`: else closed 4403), then the hardening both
sockets share (viewers/guard.py: sockets per user, the session, the frame budget, bad frames),
then the latest view as a `snapshot`, live patches, and `terminal`. Messages are JSON objects
with `type` and `revision`, except patches: arrays in the wire format of streaming/wire.py, which
carry their base too. The client names the protocol it reads (`?v=2`); a socket that names none
or another one (a tab loaded before this protocol, or after the next) gets snapshots only, at
most one a second, each saying which protocol this server speaks, so no tab misreads a patch.
What is sent when is the socket's cursor (viewers/cursor.py) and sender (viewers/sender.py).

From the client: `snapshot` (a resync: at most one pending per socket), `cancel` (the explicit
Stop, through submission.stop: refused there, answered `{"type": "error"}`; honoured and written
once per request however many sockets press it), `ping`. Disconnecting never cancels, and a reconnect
never starts an upstream call nor counts the request again.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

import orjson
from django.contrib.auth import get_user_model

from .. import limits, selectors, services, submission
from ..models import ResponseRequest
from ..ops import logcontext
from ..relay.dbthreads import ws_call, ws_db
from ..relay.hub import get_hub
from ..relay.worker import start_request
from ..streaming.wire import PROTOCOL
from .cursor import Cursor
from .guard import CLOSE_FORBIDDEN, GuardedConsumer
from .sender import Sender

CANCEL_MEMORY_SECONDS = 24 * 3600


class RequestConsumer(GuardedConsumer):
    request_id: str
    request: ResponseRequest
    cursor: Cursor
    sender: Sender | None = None
    cancel_sent = False
    cancel_refused = False

    async def connect(self) -> None:
        self.request_id = str(self.scope["url_route"]["kwargs"]["request_id"])
        self.share = self.scope["url_route"]["kwargs"].get("share")  # opened through a share link: its token
        user = self.scope.get("user")
        request = await self._load(user)
        if request is None:
            await self.refuse(CLOSE_FORBIDDEN)
            return
        if not await self.admit(user):
            return
        self.request = request
        logcontext.bind(self.request_id, request.response_id or None)  # this socket's task logs name it
        query = parse_qs(self.scope.get("query_string", b"").decode())
        loop = asyncio.get_running_loop()
        holds = query.get("revision", [""])[0]  # what a reconnecting tab shows: never sent an older view
        self.cursor = Cursor(clock=loop.time, later=loop.call_later, snapshots_only=query.get("v") != [str(PROTOCOL)],
                             holds=int(holds) if holds.isdigit() and len(holds) < 16 else -1)
        hub = get_hub()
        await hub.attach(self.request_id, self.cursor)  # before reading: nothing published from now on is missed
        self.sender = Sender(self.request_id, self.cursor, self.base_send, self.shut)
        await self.sender.snapshot()  # before the sender starts, so it is the first message
        self.sender.start()
        await self._count(query.get("reconnect") == ["1"])  # after: a tab waits for its view, not for this
        if request.status == ResponseRequest.Status.PENDING:
            await start_request(self.request_id)  # a lost start message is retried, single-flight
        elif request.status == ResponseRequest.Status.STREAMING and hub.runner(self.request_id) is None:
            await start_request(self.request_id)  # takes over only if the owner's lease ran out

    async def disconnect(self, code: int) -> None:
        try:
            sender, self.sender = self.sender, None  # it holds this consumer's `shut`: no cycle left for the GC
            if sender is not None:
                get_hub().detach(self.request_id, self.cursor)
                sender.stop()
        finally:
            await super().disconnect(code)

    async def handle(self, kind: Any, message: dict[str, Any]) -> bool:
        if kind == "snapshot":
            self.cursor.resync_now()  # one pending per socket (more would only repeat it), in order with the patches
        elif kind == "cancel":
            await self._cancel_once()
        else:
            return False
        return True

    async def _cancel_once(self) -> None:
        if self.cancel_refused:
            await self._refuse_cancel()
            return
        if self.cancel_sent:
            return
        if not await self.session_alive():  # logged out meanwhile: not honoured
            return
        user = await self._stopper()  # asked before the once-per-request mark below
        if user is None:
            self.cancel_refused = True
            await self._refuse_cancel()
            return
        self.cancel_sent = True
        # One write per request, however many sockets (in however many processes) press Stop.
        if await limits.cache_call("add", f"relay:cancel:{self.request_id}", 1, timeout=CANCEL_MEMORY_SECONDS):
            try:
                await submission.stop(request=self.request, user=user, db=ws_call)
            except submission.Refused:  # the permission went between the two reads
                await self._refuse_cancel()

    async def _refuse_cancel(self) -> None:
        await self.send(text_data=orjson.dumps({"type": "error", "message": submission.STOP_REFUSED}).decode())

    # --- database (on the websocket pool: dbthreads.ws_call) ---------------------------------------

    @ws_db
    def _load(self, user: Any) -> ResponseRequest | None:
        if user is None:
            return None
        return selectors.request_for_viewer(user=user, request_id=self.request_id, share=self.share)

    def still_visible(self) -> bool:
        return selectors.request_for_viewer(user=self.scope["user"], request_id=self.request_id,
                                            share=self.share) is not None

    @ws_db
    def _stopper(self) -> Any:
        """The user, with their permissions read now (not those cached at connect), if they may stop
        this request (the door's rule, selectors.can_cancel); None otherwise."""
        user = self.scope["user"]
        if user.is_authenticated and not selectors.is_owner(user, self.request):
            user = get_user_model()._default_manager.filter(pk=user.pk, is_active=True).first()
        return user if user is not None and selectors.can_cancel(user, self.request) else None

    @ws_db
    def _count(self, reconnect: bool) -> None:
        services.request_count(request_id=self.request.pk, viewer_connections=1, reconnects=int(reconnect))

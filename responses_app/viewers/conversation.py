"""`ConversationConsumer` at /ws/conversations/<uuid>/ (and /ws/shares/<token>/conversations/<uuid>/
for a share link's viewers): one browser tab watching one conversation.

It relays what conversation_events.py announces (the turns, a new turn, a rename, the deletion),
so every open tab shows a turn started anywhere; each tab then follows that turn's stream over
its own /ws/requests/<id>/ like any live turn. It never starts, stops or counts a request. Who may
open it: the conversation's owner, a user with the view_responserequest permission, or a share
link of the whole conversation (selectors.conversation_for_viewer; others closed 4403, a deleted
conversation 4404); then the hardening both sockets share
(viewers/guard.py). From the client it reads `ping` only.
"""

from __future__ import annotations

from typing import Any

import orjson

from .. import selectors
from ..conversation_events import conversation_group
from ..relay.dbthreads import ws_db
from ..relay.worker import ensure_worker
from .guard import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, GuardedConsumer


class ConversationConsumer(GuardedConsumer):
    conversation_id: str
    group: str | None = None

    async def connect(self) -> None:
        self.conversation_id = str(self.scope["url_route"]["kwargs"]["conversation_id"])
        self.share = self.scope["url_route"]["kwargs"].get("share")  # opened through a share link: its token
        user = self.scope.get("user")
        code, _ = await self._load(user)
        if code:
            await self.refuse(code)
            return
        if not await self.admit(user):
            return
        ensure_worker()  # the process's runner, its sweep and its watch for requests submitted elsewhere
        self.group = conversation_group(self.conversation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # Read again after joining the group: a turn added in between is in one or the other.
        _, ids = await self._load(user)
        await self._send({"type": "turns", "ids": ids})

    async def disconnect(self, code: int) -> None:
        try:
            if self.group is not None:
                await self.channel_layer.group_discard(self.group, self.channel_name)
        finally:
            await super().disconnect(code)

    async def conversation_event(self, event: dict[str, Any]) -> None:
        if not self.closing:
            await self._send(event["message"])

    async def _send(self, message: dict[str, Any]) -> None:
        await self.send(text_data=orjson.dumps(message).decode())

    @ws_db
    def _load(self, user: Any) -> tuple[int, list[str]]:
        conversation = selectors.conversation_for_viewer(user=user, conversation_id=self.conversation_id,
                                                         share=self.share)
        if conversation is None:
            return CLOSE_FORBIDDEN, []
        if conversation.deleted_at is not None:
            return CLOSE_NOT_FOUND, []
        return 0, selectors.conversation_turn_ids(conversation_id=conversation.pk)

    def still_visible(self) -> bool:
        return selectors.conversation_for_viewer(user=self.scope["user"], conversation_id=self.conversation_id,
                                                 share=self.share) is not None

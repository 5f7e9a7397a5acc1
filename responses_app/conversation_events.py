"""`ConversationConsumer` at /ws/conversations/<uuid>/: one browser tab watching one conversation.

It says which turns the conversation has and announces new ones, renames and deletion, so every
open tab shows a turn started anywhere (another tab, the API, Regenerate, Edit); each tab then
follows that turn's stream over its own /ws/requests/<id>/ like any live turn. It never starts,
stops or counts a request. Owner or staff only (others closed with 4403, a deleted conversation
with 4404). Messages (server to client only):

    {"type": "turns", "ids": [...]}          on connect: every turn, oldest first
    {"type": "turn", "request_id": id}       a turn was added
    {"type": "renamed", "title": t}          {"type": "deleted"}
"""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer

from . import selectors
from .relay.dbthreads import ws_db
from .relay.worker import ensure_worker
from .wsthreads import PooledConsumerMixin


def conversation_group(conversation_id: Any) -> str:
    return f"conversation.{conversation_id}"


async def announce(conversation_id: Any, message: dict[str, Any]) -> None:
    """Tell every tab of a conversation (in any process) about a change; `message` is what they get."""
    layer = get_channel_layer()
    if layer is not None and conversation_id:
        await layer.group_send(conversation_group(conversation_id), {"type": "conversation.event", "message": message})


async def announce_turn(request: Any) -> None:
    await announce(request.conversation_id, {"type": "turn", "request_id": str(request.pk)})


def announce_turn_sync(request: Any) -> None:
    """From sync code: through a layer that spans processes; the in-memory layer of another
    process cannot be reached (those tabs find the turn when they reconnect or reload)."""
    from asgiref.sync import async_to_sync
    from channels.layers import InMemoryChannelLayer

    layer = get_channel_layer()
    if layer is not None and not isinstance(layer, InMemoryChannelLayer):
        async_to_sync(announce_turn)(request)


class ConversationConsumer(PooledConsumerMixin, AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    conversation_id: str

    async def connect(self) -> None:
        self.conversation_id = str(self.scope["url_route"]["kwargs"]["conversation_id"])
        code, ids = await self._load(self.scope.get("user"))
        await self.accept()  # before any close: browsers see a close before the handshake as 1006
        if code:
            await self.close(code=code)
            return
        ensure_worker()  # the process's runner, its sweep and its watch for requests submitted elsewhere
        self.group = conversation_group(self.conversation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # Read again after joining the group: a turn added in between is in one or the other.
        _, ids = await self._load(self.scope.get("user"))
        await self.send_json({"type": "turns", "ids": ids})

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def conversation_event(self, event: dict[str, Any]) -> None:
        await self.send_json(event["message"])

    @ws_db
    def _load(self, user: Any) -> tuple[int, list[str]]:
        if user is None or not user.is_authenticated:
            return 4403, []
        conversation = selectors.conversation_get_for_user(user=user, conversation_id=self.conversation_id)
        if conversation is None:
            return 4403, []
        if conversation.deleted_at is not None:
            return 4404, []
        return 0, selectors.conversation_turn_ids(conversation_id=conversation.pk)

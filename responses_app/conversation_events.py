"""What every open tab of a conversation hears (viewers/conversation.py relays it to them):
which turns it has, a turn added anywhere (another tab, the API, Regenerate, Edit), a rename and
the deletion. Messages, server to client:

    {"type": "turns", "ids": [...]}          on connect: the turns of the branch shown, first turn first
    {"type": "branch", "ids": [...]}         the branch shown changed (a version picked, Regenerate,
                                             Edit, a new turn): its turns, first turn first
    {"type": "turn", "request_id": id}       a turn was added (after its `branch`)
    {"type": "renamed", "title": t}          {"type": "deleted"}
"""

from __future__ import annotations

from typing import Any

from channels.layers import get_channel_layer


def conversation_group(conversation_id: Any) -> str:
    return f"conversation.{conversation_id}"


async def announce(conversation_id: Any, message: dict[str, Any]) -> None:
    """Tell every tab of a conversation (in any process) about a change; `message` is what they get."""
    layer = get_channel_layer()
    if layer is not None and conversation_id:
        await layer.group_send(conversation_group(conversation_id), {"type": "conversation.event", "message": message})


async def announce_turn(request: Any, *, branch: list[str] | None = None) -> None:
    """A new turn: its branch first (the tabs show it: a new version replaces the turns after its
    place), then the turn."""
    if branch:
        await announce(request.conversation_id, {"type": "branch", "ids": branch})
    await announce(request.conversation_id, {"type": "turn", "request_id": str(request.pk)})


def announce_turn_sync(request: Any, *, branch: list[str] | None = None) -> None:
    """From sync code: through a layer that spans processes; the in-memory layer of another
    process cannot be reached (those tabs find the turn when they reconnect or reload)."""
    from asgiref.sync import async_to_sync
    from channels.layers import InMemoryChannelLayer

    layer = get_channel_layer()
    if layer is not None and not isinstance(layer, InMemoryChannelLayer):
        async_to_sync(announce_turn)(request, branch=branch)

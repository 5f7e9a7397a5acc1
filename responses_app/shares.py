"""Share links (the writes): made and revoked by the conversation's owner. Who may open one is
selectors.share_open, for the shared pages and their sockets alike.

Every socket opened through a link (a turn's, the conversation's) joins the link's group
(viewers/guard.py), so a revocation closes them at once in any process, as a logout closes a
session's sockets: the viewer's page says it may no longer watch, and the link answers 404 from
then on.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from typing import Any

from channels.layers import get_channel_layer
from django.utils import timezone

from . import selectors
from .conf import app_settings
from .models import Conversation, ResponseRequest, Share

logger = logging.getLogger(__name__)

TOKEN_BYTES = 24  # 192 bits: a link cannot be guessed
CLOSE_REVOKED = 4403  # as "not yours": the page stops following and says so


def share_group(token: str) -> str:
    return "relay-share." + hashlib.sha256(token.encode()).hexdigest()[:40]


def share_create(*, conversation: Conversation, user: Any, request: ResponseRequest | None = None,
                 anonymous: bool = False) -> Share:
    """A read-only link to the conversation, or to one of its turns. `anonymous` (no account
    needed) only where RELAY_SHARE_ANONYMOUS allows it."""
    if not selectors.is_owner(user, conversation):
        raise PermissionError("only the owner shares a conversation")
    if request is not None and request.conversation_id != conversation.pk:
        raise ValueError("the turn is not this conversation's")
    if anonymous and not app_settings.SHARE_ANONYMOUS:
        raise ValueError("links without an account are not allowed here")
    return Share.objects.create(token=secrets.token_urlsafe(TOKEN_BYTES), conversation=conversation,
                                request=request, created_by=user, anonymous=anonymous)


def share_revoke(*, share: Share) -> bool:
    """True for the call that revoked it (a second one changes nothing)."""
    revoked = Share.objects.filter(pk=share.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    return revoked == 1


def shares_of(*, conversation: Conversation) -> list[Share]:
    """The conversation's links still working, newest first (the owner's list)."""
    return list(Share.objects.filter(conversation=conversation, revoked_at__isnull=True)
                .select_related("request").order_by("-created"))


async def close_sockets(token: str) -> None:
    """Close every socket opened through this link, in any process (the layer's group)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(share_group(token), {"type": "relay.share_revoked"})
    except Exception:  # the revocation stands: the link is refused now, its sockets close at their next check
        logger.exception("could not tell the sockets of a revoked share link to close")

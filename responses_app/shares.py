"""Share links (the writes): made and revoked by the conversation's owner. Who may open one is
selectors.share_open, for the shared pages and their sockets alike.

A signed-in visitor continues a shared conversation as their own (`share_continue`): a copy of
the turns the link shows, as text, in a new conversation of theirs. The copy chains to nothing of
the owner's: its turns carry no response id, so the first turn added to it sends them as input
(branches.branch_head, selectors.conversation_context), never `previous_response_id`.

Every socket opened through a link (a turn's, the conversation's) joins the link's group
(viewers/guard.py), so a revocation closes them at once in any process, as a logout closes a
session's sockets: the viewer's page says it may no longer watch, and the link answers 404 from
then on.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import uuid
from datetime import timedelta
from typing import Any

from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from . import continuing, search, selectors
from .conf import app_settings
from .models import Checkpoint, Conversation, ResponseRequest, Share
from .streaming.vocabulary import ENDED_STATUSES, INPUT_FLAGGED

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


def share_continue(*, share: Share, user: Any, key: uuid.UUID) -> Conversation | None:
    """A new conversation of `user`'s holding the turns the link shows (the branch shown, or its
    one turn) that have ended, each as its prompt's text and its answer's text; None when there
    is none yet. `key` (the form's) makes a resubmitted form find the copy it made."""
    existing = ResponseRequest.objects.filter(owner=user, client_request_id=f"copy:{key}:0").first()
    if existing is not None and existing.conversation is not None:
        if existing.conversation.deleted_at is None:
            return existing.conversation
        key = uuid.uuid4()  # that copy was deleted since: a new one
    # a turn with continuations (continuing.py) is copied as one: its prompt, its joined answer
    if share.request is not None:
        shown = [continuing.turn_of(share.request)]
    else:
        shown = continuing.conversation_turns(conversation=share.conversation)
    turns = [(turn.head, turn.request, turn.view) for turn in shown
             if turn.request.status in ENDED_STATUSES and turn.head.error_code != INPUT_FLAGGED]
    if not turns:
        return None
    now = timezone.now()
    with transaction.atomic():
        conversation = Conversation.objects.create(owner=user, title=share.conversation.title, created=now, updated=now)
        parent = None
        for index, (original, ended, view) in enumerate(turns):
            parent = _copy_turn(original, ended, view, conversation=conversation, parent=parent,
                                key=f"copy:{key}:{index}", at=now + timedelta(microseconds=index))
        Conversation.objects.filter(pk=conversation.pk).update(leaf=parent)
    search.index([r.pk for r in conversation.requests.all()])
    return conversation


def _copy_turn(original: ResponseRequest, ended: ResponseRequest, view: dict[str, Any], *,
               conversation: Conversation, parent: ResponseRequest | None, key: str, at: Any) -> ResponseRequest:
    """`original`: the turn's first part (its prompt); `ended`: its last (its outcome)."""
    blocks = [dict(block, state="done") for block in view.get("blocks") or ()
              if block.get("kind") == "text" and block.get("text")]
    copy = ResponseRequest.objects.create(
        owner=conversation.owner, conversation=conversation, parent=parent, client_request_id=key,
        model=original.model, provider=original.provider, input=prompt_text(original.input), params={},
        status=ended.status, incomplete_reason=ended.incomplete_reason, error_code=ended.error_code,
        error_message=ended.error_message, final_text="\n\n".join(block["text"] for block in blocks),
        created=at, terminal_at=at, copy_of=original.pk)
    Checkpoint.objects.create(request=copy, revision=len(blocks), reason="terminal", created=at, view={
        "revision": len(blocks), "meta": {"response_id": None, "status": ended.status}, "blocks": blocks})
    return copy


def prompt_text(value: Any) -> str:
    """The text of what a person sent: its user messages' text (no images, files or tool items)."""
    if isinstance(value, str):
        return value
    texts: list[str] = []
    for item in value if isinstance(value, list) else ():
        if not isinstance(item, dict) or item.get("role", "user") != "user" or item.get("type", "message") != "message":
            continue
        content = item.get("content")
        parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
        texts.extend(part["text"] for part in (parts if isinstance(parts, list) else ()) if isinstance(part, dict)
                     and part.get("type") == "input_text" and isinstance(part.get("text"), str))
    return "\n\n".join(text for text in texts if text)


async def close_sockets(token: str) -> None:
    """Close every socket opened through this link, in any process (the layer's group)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(share_group(token), {"type": "relay.share_revoked"})
    except Exception:  # the revocation stands: the link is refused now, its sockets close at their next check
        logger.exception("could not tell the sockets of a revoked share link to close")

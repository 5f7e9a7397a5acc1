"""Continue through the front-end streams (frontend_streams.py): which answer a client asks to
continue, started through the one door (submission.continue_answer), and how its stream names the
rest as the same message (a continuation's turn and the parts before it).

AG-UI: `forwardedProps.continue` is `true` (the thread's last answer) or a request id of the turn
to continue. The AI SDK: `sendMessage()` with no message while the stopped assistant message is
last; its id (the turn's first request) names the turn. Either way the last part of the turn goes
on, if continuing.refusal allows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse

from .. import continuing, selectors, submission
from ..models import ResponseRequest
from ..submission import Refused, Submitted

try:
    from ..frontends import agui
except ImportError:  # the optional extra: responses-relay[agui]
    agui = None  # type: ignore[assignment]


def _go_on(user: Any, named: str | None, thread_id: str, key: Callable[[ResponseRequest], str]) -> Submitted:
    """Continue the last part of the turn `named` (any of its request ids), else of the thread's
    last turn, through the one door (submission.continue_answer); Refused 404 when there is none."""
    if named is not None:
        request = selectors.request_get_for_user(user=user, request_id=named)
    else:
        conversation_id = selectors.thread_conversation_id(user=user, thread_id=thread_id)
        conversation = selectors.conversation_open_for_user(user=user, conversation_id=conversation_id)
        turns = continuing.conversation_turns(conversation=conversation) if conversation is not None else []
        request = turns[-1].request if turns else None
    if request is None:
        raise Refused(404, "not_found", "No such answer to continue.")
    source = continuing.turn_of(request).request
    return submission.continue_answer(user=user, source=source, client_request_id=key(source))


async def go_on(user: Any, named: str | None, thread_id: str, key: Callable[[ResponseRequest], str],
                ) -> tuple[ResponseRequest | None, HttpResponse | None]:
    """Continue a stopped or cut-short answer (`_go_on`); the continuation, or the answer that refuses it."""
    try:
        done = await sync_to_async(_go_on)(user, named, thread_id, key)
    except Refused as refused:
        return None, refused.answer()
    await submission.start(done)  # and the conversation's open tabs show it as the rest of the answer
    return done.request, None


def earlier(request: ResponseRequest) -> tuple[str, list[tuple[str, dict[str, Any], str]]]:
    """A continuation's turn: its message (the first part's id) and the ended parts before it
    (id, view, status); a request's own id and none for any other."""
    if request.continues_id is None:
        return str(request.pk), []
    parts = continuing.turn_of(request).parts
    before = parts[:[p.pk for p in parts].index(request.pk)] if request in parts else []
    views = selectors.views_latest(request_ids=[p.pk for p in before])
    return str(parts[0].pk), [(str(p.pk), views.get(p.pk) or selectors.empty_view(p), p.status) for p in before]


def joins(request: ResponseRequest) -> str | None:
    """The AG-UI message a continuation's first text goes on as (agui.continued_message_id)."""
    _, before = earlier(request)
    if agui is None or not before:
        return None
    return agui.continued_message_id([(scope, view) for scope, view, _ in before])

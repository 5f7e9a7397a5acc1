"""Continue: an answer that was stopped (cancelled) or cut short (incomplete) goes on where it ended.

A continuation is a request of its own (counted once, as every request), with `continues` naming
the one it goes on from, which is also its `parent`: the next turn on the branch. It asks the model
to go on exactly where it stopped, chained to the stopped response (`previous_response_id`) when
the provider keeps it and it ended as a response (incomplete), else with the branch's turns as input
(`params["full_context"]`, selectors.conversation_context: the stopped answer's text included).

The pages show a turn and its continuations as one turn with one answer: the turn's prompt, the
answers joined (`join_views`: the first continued text block takes the next part's first text
block into it), the article named after the first part (`head`) and followed live through the
last. The branch's turn ids that tabs compare (branches.Tree.shown) are the heads; search, export,
copy and the shared pages read the joined text.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from . import branches, selectors
from .branches import Versions
from .models import Conversation, ResponseRequest
from .streaming import vocabulary as v

# What the continuation asks; the simulator answers it by going on with the text it cut off.
INSTRUCTION = ("Continue exactly where your previous answer stopped, from its last word on, "
               "without repeating anything or starting over.")
CONTINUABLE = frozenset({v.CANCELLED, v.INCOMPLETE})

NOT_OWNER = "Only the owner of this conversation can continue its answers."
NOT_LAST = "Only the last answer of the conversation can be continued. Reply below instead."
NOT_STOPPED = "This answer is complete, so there is nothing to continue. Regenerate it or reply below instead."
STILL_RUNNING = "This answer is still being written. Wait for it to end, or stop it first."
NOT_IN_CONVERSATION = "This answer is not part of a conversation, so there is no turn to continue."


def refusal(request: ResponseRequest, *, last: bool) -> str | None:
    """Why this turn cannot be continued now (words for people), or None. `last`: it is the last
    turn of the branch shown, with nothing after it."""
    if request.status not in v.ENDED_STATUSES:
        return STILL_RUNNING
    if request.status not in CONTINUABLE:
        return NOT_STOPPED
    if not last:
        return NOT_LAST
    return None


def offered(request: ResponseRequest, *, last: bool) -> bool:
    return refusal(request, last=last) is None


def chained(source: ResponseRequest, *, stores: bool, same_provider: bool) -> bool:
    """Continue from the stored response itself: only a response that ended as one (incomplete,
    kept by a provider that keeps responses, the one that serves the continuation). A stopped one
    goes as the branch's turns, its text as shown included: what the person saw is what goes on."""
    return source.status == v.INCOMPLETE and bool(source.response_id) and stores and same_provider


# --- one answer out of several parts ------------------------------------------------------------------

def groups(requests: Sequence[ResponseRequest]) -> list[list[ResponseRequest]]:
    """A branch's turns, each with its continuations after it: a part that continues the turn
    before it on the branch joins that turn's group."""
    out: list[list[ResponseRequest]] = []
    for request in requests:
        if out and request.continues_id is not None and request.continues_id == out[-1][-1].pk:
            out[-1].append(request)
        else:
            out.append([request])
    return out


def join_views(views: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One answer's view out of its parts' views, in order: their blocks one after another, the
    first text block of a part joined to the text block that ended the part before it; the meta and
    revision are the last part's (the one followed live)."""
    if len(views) == 1:
        return views[0]
    blocks: list[dict[str, Any]] = []
    for view in views:
        parts = list(view.get("blocks") or [])
        if parts and blocks and blocks[-1].get("kind") == "text" and parts[0].get("kind") == "text":
            blocks[-1] = {**blocks[-1], "text": (blocks[-1].get("text") or "") + (parts[0].get("text") or "")}
            parts = parts[1:]
        blocks.extend(parts)
    last = views[-1]
    return {**last, "blocks": blocks}


def join_texts(texts: Iterable[str]) -> str:
    """The answer's text out of its parts' texts: each goes on from the last word of the one before."""
    return "".join(texts)


# --- reads: the turns as the pages show them ----------------------------------------------------------

class Turn(NamedTuple):
    """One turn as shown: `request` its last part (followed live, stopped, continued, rated),
    `view` that part's view, or when it has ended the whole answer's (joined); `versions` and
    `head` its first part's (the prompt, Regenerate, Edit, the turn's name on the page);
    `earlier` the parts before a live last one, joined (shown above it); `last`: nothing follows
    it on the branch the conversation shows (Continue is offered there only)."""

    request: ResponseRequest
    view: dict[str, Any]
    versions: Versions | None
    head: ResponseRequest
    earlier: dict[str, Any] | None
    last: bool
    text: str  # the answer's text, joined
    parts: list[ResponseRequest]


def _turn(parts: list[ResponseRequest], views: dict[Any, dict[str, Any]], versions: Versions,
          last: bool) -> Turn:
    own = [views.get(r.pk) or selectors.empty_view(r) for r in parts]
    request = parts[-1]
    live = request.status not in v.ENDED_STATUSES
    earlier = join_views(own[:-1]) if live and len(parts) > 1 else None
    text = join_texts(r.final_text for r in parts)
    return Turn(request, own[-1] if live else join_views(own), versions, parts[0], earlier, last, text, parts)


def conversation_turns(*, conversation: Conversation, through: uuid.UUID | None = None) -> list[Turn]:
    """The branch shown (or the one through the turn `through`, for one page view), each turn with
    its continuations, the latest committed views and its place among its versions (two queries)."""
    by_pk = {r.pk: r for r in conversation.requests.all()}
    turns = branches.Tree(((r.pk, r.parent_id, r.created) for r in by_pk.values()),
                          continues={r.pk: r.continues_id for r in by_pk.values() if r.continues_id})
    leaf = branches.leaf_through(turns, conversation.leaf_id, through)
    path = turns.path(leaf) if leaf is not None else []
    views = selectors.views_latest(request_ids=path)
    chosen = turns.leaf(conversation.leaf_id)
    return [_turn(parts, views, turns.versions(parts[0].pk), parts[-1].pk == chosen and turns.last(chosen))
            for parts in groups([by_pk[pk] for pk in path])]


def turn_of(request: ResponseRequest) -> Turn:
    """The turn a request is part of (its first part, its continuations): what the page shows
    in its place (a new turn, a finished answer swapped in)."""
    if request.conversation_id is None:
        return _turn([request], selectors.views_latest(request_ids=[request.pk]), Versions(1, 1, None, None), False)
    turns = branches.tree(request.conversation_id)
    ids = [request.pk]
    while turns.continues.get(ids[0]) is not None and turns.continues[ids[0]] == turns.parent.get(ids[0]):
        ids.insert(0, turns.continues[ids[0]])
    while after := [pk for pk in turns.children.get(ids[-1], ()) if turns.continues.get(pk) == ids[-1]]:
        ids.append(after[-1])
    by_pk = ResponseRequest.objects.in_bulk(ids)
    parts = [by_pk[pk] for pk in ids if pk in by_pk]
    leaf_id = Conversation.objects.filter(pk=request.conversation_id).values_list("leaf_id", flat=True).first()
    chosen = turns.leaf(leaf_id)
    return _turn(parts, selectors.views_latest(request_ids=ids), turns.versions(ids[0]),
                 ids[-1] == chosen and turns.last(ids[-1]))

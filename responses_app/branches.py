"""A conversation as a tree of turns.

Each turn (one logical request) follows its `parent`; turns with the same parent are *versions*
of one place in the conversation, oldest first: Regenerate and Edit add one, each its own logical
request, counted once. The conversation's `leaf` is the last turn of the branch every tab shows.
That branch, the path from the first turn to the leaf, is what the page renders and exports,
what a new turn follows, and what is sent upstream: `previous_response_id` of its last completed
answer, or its turns as input when the upstream no longer has that chain.

Everything is read from one query of a conversation's (id, parent, created) rows into a `Tree`
(pure: no queries). One write lives here, `branch_select` (which branch is shown); a new turn
becomes the leaf in services.request_create.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .models import Conversation, ResponseRequest
from .streaming.vocabulary import INPUT_FLAGGED

Row = tuple[uuid.UUID, "uuid.UUID | None", datetime]


@dataclass(frozen=True, slots=True)
class Versions:
    """A turn among the versions of its place: `index` of `count` (from 1), and its neighbours."""

    index: int
    count: int
    previous: uuid.UUID | None
    next: uuid.UUID | None


class Tree:
    """The turns of one conversation by parent, each parent's children oldest first; `answers`:
    the response id of each completed turn, `unsent`: turns the precheck flagged (never sent)."""

    def __init__(self, rows: Iterable[Row], *, answers: dict[uuid.UUID, str] | None = None,
                 unsent: set[uuid.UUID] | None = None, continues: dict[uuid.UUID, uuid.UUID] | None = None) -> None:
        self.answers = answers or {}
        self.unsent = unsent or set()
        # Continue (continuing.py): a turn that goes on with its parent's answer, shown as part of it.
        self.continues = continues or {}
        self.parent: dict[uuid.UUID, uuid.UUID | None] = {}
        self.created: dict[uuid.UUID, datetime] = {}
        self.children: dict[uuid.UUID | None, list[uuid.UUID]] = {}
        # A parent is always older than its children: in creation order, every parent is known first.
        for pk, parent, created in sorted(rows, key=lambda row: (row[2], str(row[0]))):
            parent = parent if parent in self.parent else None  # a parent deleted in the admin: a first turn
            self.parent[pk] = parent
            self.created[pk] = created
            self.children.setdefault(parent, []).append(pk)

    def __contains__(self, pk: object) -> bool:
        return pk in self.parent

    def __len__(self) -> int:
        return len(self.parent)

    def path(self, leaf: uuid.UUID) -> list[uuid.UUID]:
        """The branch from the first turn to `leaf`, in order."""
        out: list[uuid.UUID] = []
        node: uuid.UUID | None = leaf
        while node is not None:
            out.append(node)
            node = self.parent[node]
        out.reverse()
        return out

    def shown(self, path: list[uuid.UUID]) -> list[uuid.UUID]:
        """The turns of a branch as the pages show them: a continuation is part of the turn it
        continues, the one named for both."""
        return [pk for pk in path if self.continues.get(pk) != self.parent[pk] or self.parent[pk] is None]

    def last(self, pk: uuid.UUID) -> bool:
        """Nothing follows this turn: no new turn, no continuation."""
        return not self.children.get(pk)

    def newest(self) -> uuid.UUID | None:
        return max(self.created, key=lambda pk: (self.created[pk], str(pk))) if self.created else None

    def newest_under(self, node: uuid.UUID) -> uuid.UUID:
        """The newest turn at or below `node`: a leaf (a turn's children are newer than it), the
        end of the branch that was last added to there."""
        best, stack = node, [node]
        while stack:
            current = stack.pop()
            if (self.created[current], str(current)) > (self.created[best], str(best)):
                best = current
            stack.extend(self.children.get(current, ()))
        return best

    def versions(self, node: uuid.UUID) -> Versions:
        siblings = self.children[self.parent[node]]
        i = siblings.index(node)
        return Versions(i + 1, len(siblings), siblings[i - 1] if i else None,
                        siblings[i + 1] if i + 1 < len(siblings) else None)

    def leaf(self, chosen: uuid.UUID | None) -> uuid.UUID | None:
        """The chosen leaf, or the newest turn when none is (or it is gone)."""
        return chosen if chosen in self else self.newest()


# --- reads ------------------------------------------------------------------------------------------

def tree(conversation_id: Any) -> Tree:
    rows = list(ResponseRequest.objects.filter(conversation_id=conversation_id).values_list(
        "pk", "parent_id", "created", "status", "response_id", "error_code", "continues_id"))
    return Tree([row[:3] for row in rows],
                continues={row[0]: row[6] for row in rows if row[6] is not None},
                answers={pk: response_id for pk, _p, _c, status, response_id, _e, _n in rows
                         if status == ResponseRequest.Status.COMPLETED and response_id},
                # A turn the precheck flagged was never sent, and never is: not a turn of any context.
                unsent={pk for pk, *_rest, error_code, _n in rows if error_code == INPUT_FLAGGED})


def chosen_path_ids(conversation_id: Any) -> list[str]:
    leaf_id = Conversation.objects.filter(pk=conversation_id).values_list("leaf_id", flat=True).first()
    turns = tree(conversation_id)
    leaf = turns.leaf(leaf_id)
    return [str(pk) for pk in turns.shown(turns.path(leaf))] if leaf is not None else []


def chosen_leaf_id(conversation_id: Any) -> uuid.UUID | None:
    """What a new turn follows: the leaf as stored now (another tab may have picked a version),
    or the newest turn when none is chosen."""
    leaf: uuid.UUID | None = Conversation.objects.filter(pk=conversation_id).values_list("leaf_id", flat=True).first()
    if leaf is not None:
        return leaf
    return ResponseRequest.objects.filter(conversation_id=conversation_id).order_by("-created").values_list(
        "pk", flat=True).first()


def leaf_through(turns: Tree, chosen: uuid.UUID | None, through: uuid.UUID | None) -> uuid.UUID | None:
    """The leaf of the branch to show: the chosen one, or, when the turn `through` is not on its
    branch, the newest turn below `through` (one version opened for one page view: nothing saved)."""
    leaf = turns.leaf(chosen)
    if through is None or through not in turns or leaf is None or through in turns.path(leaf):
        return leaf
    return turns.newest_under(through)


def version_age(turns: Tree, shown: list[uuid.UUID], node: uuid.UUID) -> str | None:
    """Where a turn stands beside the branch `shown`: None on it; else "older" or "newer", its
    version against the one shown where the two branches part."""
    if node not in turns or node in shown:
        return None
    own = turns.path(node)
    place = next(i for i, pk in enumerate(own) if i >= len(shown) or shown[i] != pk)
    if place >= len(shown):
        return "newer"
    return "older" if (turns.created[own[place]], str(own[place])) < (turns.created[shown[place]],
                                                                        str(shown[place])) else "newer"


def versions_of(request: ResponseRequest) -> Versions:
    """One turn's place among its versions (its siblings only: one query)."""
    siblings = list(ResponseRequest.objects.filter(conversation=request.conversation_id, parent_id=request.parent_id)
                    .order_by("created", "pk").values_list("pk", flat=True))
    if request.pk not in siblings:  # a parent deleted in the admin
        return Versions(1, 1, None, None)
    i = siblings.index(request.pk)
    return Versions(i + 1, len(siblings), siblings[i - 1] if i else None,
                    siblings[i + 1] if i + 1 < len(siblings) else None)


@dataclass(frozen=True, slots=True)
class Head:
    """What a turn added after `parent` is chained to: the last completed answer on the branch, and
    whether there are turns before it at all (without a response to chain to, the branch's turns
    are sent as input)."""

    previous_response_id: str
    has_turns: bool
    path: list[uuid.UUID]  # the branch up to `parent`, first turn first


def branch_head(*, turns: Tree, parent_id: uuid.UUID | None) -> Head:
    chain = turns.path(parent_id) if parent_id is not None and parent_id in turns else []
    previous = next((turns.answers[pk] for pk in reversed(chain) if pk in turns.answers), "")
    return Head(previous, any(pk not in turns.unsent for pk in chain), chain)


def ancestors(*, conversation_id: Any, request_id: uuid.UUID) -> list[uuid.UUID]:
    """The turns before this one on its branch, first turn first."""
    turns = tree(conversation_id)
    return turns.path(request_id)[:-1] if request_id in turns else []


# --- the one write ----------------------------------------------------------------------------------

def branch_select(*, conversation: Conversation, request_id: Any) -> tuple[list[str], bool] | None:
    """Show the branch through this turn (a version picked, a search result opened) in every tab:
    unless it is shown already, the newest turn below it becomes the leaf. The branch's turn ids
    and whether it changed; None when the turn is not one of this conversation's."""
    try:
        node = uuid.UUID(str(request_id))
    except ValueError:
        return None
    turns = tree(conversation.pk)
    if node not in turns:
        return None
    leaf = turns.leaf(conversation.leaf_id)
    path = turns.path(leaf) if leaf is not None else []
    changed = node not in path
    if changed:
        leaf = turns.newest_under(node)
        path = turns.path(leaf)
        Conversation.objects.filter(pk=conversation.pk).update(leaf_id=leaf)
        conversation.leaf_id = leaf
    return [str(pk) for pk in turns.shown(path)], changed

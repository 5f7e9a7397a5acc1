"""The view model: a revision per op, compact ops, patches that continue a revision or fail."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from responses_app.streaming.view import ViewModel, apply_op, apply_patch

EMPTY: dict[str, Any] = {"revision": 0, "meta": {"response_id": None, "status": None}, "blocks": []}


def test_every_op_bumps_the_revision_and_ops_are_compact() -> None:
    view = ViewModel()
    view.add({"id": "o0-c0", "kind": "text", "state": "streaming"})
    view.append("o0-c0", "hel")
    view.append("o0-c0", "")  # nothing to append: no op
    view.append("o0-c0", "lo")
    view.set("o0-c0", {"state": "done"})
    view.set("o0-c0", {"state": "done"})  # unchanged: no op
    view.set_meta({"status": "completed"})
    base, ops = view.take_ops()
    assert base == 0 and view.revision == len(ops) == 5
    assert ops == [
        ["add", {"id": "o0-c0", "kind": "text", "state": "streaming", "text": ""}],
        ["append", "o0-c0", "hel"],
        ["append", "o0-c0", "lo"],
        ["set", "o0-c0", {"state": "done"}],
        ["meta", {"status": "completed"}],
    ]
    assert view.take_ops() == (5, [])
    assert view.to_dict()["blocks"] == [{"id": "o0-c0", "kind": "text", "state": "done",
                                         "text": "hello"}]


def test_set_text_replaces_in_place_and_later_appends_continue() -> None:
    view = ViewModel()
    view.add({"id": "b", "kind": "text", "text": "draft"})
    chunks = view._chunks["b"]
    view.set("b", {"text": "final"})
    view.append("b", "!")
    assert view._chunks["b"] is chunks  # the same list: the assembler's fast path holds it
    assert view.text("b") == "final!"
    client = copy.deepcopy(EMPTY)
    assert apply_patch(client, {"base": 0, "revision": view.revision, "ops": view.take_ops()[1]})
    assert client == view.to_dict()


def test_patches_apply_only_on_their_base() -> None:
    view = ViewModel()
    view.add({"id": "b", "kind": "text"})
    first = {"base": 0, "revision": view.revision, "ops": view.take_ops()[1]}
    view.append("b", "x")
    second = {"base": 1, "revision": view.revision, "ops": view.take_ops()[1]}
    client = copy.deepcopy(EMPTY)
    assert apply_patch(client, second) is False  # a gap: the client asks for a snapshot
    assert apply_patch(client, first) and apply_patch(client, second)
    assert apply_patch(client, second) is False  # a duplicate
    assert client == view.to_dict()


def test_snapshot_round_trip_continues_the_revision() -> None:
    view = ViewModel()
    view.add({"id": "b", "kind": "text", "text": "abc"})
    view.set_meta({"response_id": "resp_1"})
    copy_of = ViewModel.from_dict(view.to_dict())
    assert copy_of.to_dict() == view.to_dict()
    copy_of.append("b", "d")
    assert copy_of.take_ops() == (2, [["append", "b", "d"]])


def test_add_of_an_existing_block_is_a_set() -> None:
    view = ViewModel()
    view.add({"id": "b", "kind": "text", "text": "x"})
    view.add({"id": "b", "kind": "text", "state": "done", "text": "x"})
    assert view.take_ops()[1][1] == ["set", "b", {"state": "done"}]
    client = copy.deepcopy(EMPTY)
    apply_op(client, ["add", {"id": "b", "kind": "text", "text": ""}])
    apply_op(client, ["add", {"id": "b", "kind": "text", "text": "y"}])
    assert client["blocks"] == [{"id": "b", "kind": "text", "text": "y"}]


def test_unknown_op_and_unknown_block_raise() -> None:
    with pytest.raises(ValueError):
        apply_op(copy.deepcopy(EMPTY), ["explode"])
    with pytest.raises(KeyError):
        apply_op(copy.deepcopy(EMPTY), ["append", "nope", "x"])

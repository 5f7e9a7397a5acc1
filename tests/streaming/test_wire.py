"""The websocket wire format (protocol 2): terse frames that `decode` turns back into the patches
`apply_patch` takes; a shorthand only where it is provably the same block; bad frames refused."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from responses_app.streaming.coalescer import Coalescer
from responses_app.streaming.view import ViewModel, apply_patch
from responses_app.streaming.wire import WireError, decode, encode_patch

EMPTY_VIEW: dict[str, Any] = {"revision": 0, "meta": {"response_id": None, "status": None}, "blocks": []}


def patch_of(view: ViewModel, coalescer: Coalescer) -> dict[str, Any]:
    base, ops = view.take_ops()
    coalescer.push(base, ops, view.revision)
    patch = coalescer.flush()
    assert patch is not None
    return patch


def test_text_appended_to_the_last_block_is_the_text_alone() -> None:
    view, coalescer = ViewModel(), Coalescer()
    view.add({"id": "msg_0123456789abcdef-c0", "kind": "text"})
    patch_of(view, coalescer)
    for word in ("Hel", "lo", " wor", "ld"):
        view.append("msg_0123456789abcdef-c0", word)
    patch = patch_of(view, coalescer)
    frame = encode_patch(patch, view.order())
    assert frame == b'[5,4,"Hello world"]'
    assert decode(frame) == {"type": "patch", "base": 1, "revision": 5, "ops": ["Hello world"]}


def test_an_earlier_block_is_named_and_a_block_added_in_the_patch_becomes_the_last() -> None:
    view, coalescer = ViewModel(), Coalescer()
    view.add({"id": "r0", "kind": "reasoning"})
    view.add({"id": "m0", "kind": "text"})
    client = copy.deepcopy(EMPTY_VIEW)
    assert apply_patch(client, decode(encode_patch(patch_of(view, coalescer), view.order())))
    view.append("r0", "thinking")  # not the last block
    view.append("m0", "a")  # the last block at the patch's base
    view.add({"id": "m1", "kind": "text"})
    view.append("m1", "b")  # the block this patch added
    view.set("m0", {"state": "done"})
    view.append("m0", "c")  # named again: m1 is last now
    frame = encode_patch(patch_of(view, coalescer), view.order())
    ops = orjson.loads(frame)[2:]
    assert ops == [["append", "r0", "thinking"], "a", ["add", {"id": "m1", "kind": "text", "text": ""}], "b",
                   ["set", "m0", {"state": "done"}], ["append", "m0", "c"]]
    assert apply_patch(client, decode(frame))
    assert client == view.to_dict()


@pytest.mark.parametrize("with_order", [True, False])
def test_a_block_placed_after_an_earlier_one_never_takes_the_last_blocks_text(with_order: bool) -> None:
    view, coalescer = ViewModel(), Coalescer()
    view.add({"id": "m0", "kind": "text"})
    view.add({"id": "m1", "kind": "text"})
    client = copy.deepcopy(EMPTY_VIEW)
    assert apply_patch(client, decode(encode_patch(patch_of(view, coalescer), view.order())))
    view.append("m1", "a")
    view.add({"id": "notice", "kind": "compaction", "after": "m0"})  # between m0 and m1
    view.append("notice", "withheld")  # not the last block, though the last one added
    view.append("m1", "b")  # m1 is still the last block
    view.add({"id": "n2", "kind": "compaction", "after": "m1"})  # after the last one: last now
    view.append("n2", "c")
    frame = encode_patch(patch_of(view, coalescer), view.order() if with_order else None)
    assert apply_patch(client, decode(frame))
    assert client == view.to_dict()
    assert [b["id"] for b in client["blocks"]] == ["m0", "notice", "m1", "n2"]


def test_without_the_order_only_blocks_the_patch_added_take_the_shorthand() -> None:
    view, coalescer = ViewModel(), Coalescer()
    view.add({"id": "m0", "kind": "text"})
    patch_of(view, coalescer)
    view.append("m0", "a")
    view.add({"id": "m1", "kind": "text"})
    view.append("m1", "b")
    frame = encode_patch(patch_of(view, coalescer), None)
    assert orjson.loads(frame)[2:] == [["append", "m0", "a"], ["add", {"id": "m1", "kind": "text", "text": ""}], "b"]


def test_decoded_frames_keep_the_revision_rule() -> None:
    view, coalescer = ViewModel(), Coalescer()
    view.add({"id": "m0", "kind": "text"})
    first = encode_patch(patch_of(view, coalescer), view.order())
    view.append("m0", "x")
    view.append("m0", "y")
    second = encode_patch(patch_of(view, coalescer), view.order())
    client = copy.deepcopy(EMPTY_VIEW)
    assert apply_patch(client, decode(second)) is False  # a gap: the client asks for a snapshot
    assert apply_patch(client, decode(first)) and apply_patch(client, decode(second))
    assert apply_patch(client, decode(second)) is False  # a duplicate
    assert client == view.to_dict() and client["revision"] == 3


def test_other_messages_are_objects_and_pass_through() -> None:
    snapshot = {"type": "snapshot", "revision": 3, "protocol": 2, "view": EMPTY_VIEW}
    assert decode(orjson.dumps(snapshot)) == snapshot
    assert decode('{"type":"terminal","status":"completed","revision":9}')["status"] == "completed"


@pytest.mark.parametrize("frame", [
    "not json", "[]", "[1]", "[1,0]", "[1,-2]", '["1",1]', "[true,1]", "[1.5,1]", "[3,1,5]", "[3,1,[]]",
    '[3,1,[1,"x"]]', '{"no":"type"}', '"text"', "3",
])
def test_a_frame_of_no_message_is_refused_clearly(frame: str) -> None:
    with pytest.raises(WireError):
        decode(frame)

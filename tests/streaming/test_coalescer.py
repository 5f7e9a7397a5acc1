"""The Coalescer: time is an argument, adjacent appends merge, nothing reorders, bounded memory."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from responses_app.streaming.coalescer import Coalescer
from responses_app.streaming.policies import FlushPolicy
from responses_app.streaming.view import ViewModel, apply_patch

EMPTY_VIEW: dict[str, Any] = {"revision": 0, "meta": {"response_id": None, "status": None},
                              "blocks": []}


def view_with_blocks(*ids: str) -> ViewModel:
    view = ViewModel()
    for block_id in ids:
        view.add({"id": block_id, "kind": "text"})
    return view


def push_all(coalescer: Coalescer, view: ViewModel) -> bool:
    base, ops = view.take_ops()
    return coalescer.push(base, ops, view.revision)


def test_adjacent_appends_to_one_block_merge_into_one_op() -> None:
    view = view_with_blocks("a")
    coalescer = Coalescer()
    assert push_all(coalescer, view) is True  # the add is a boundary
    coalescer.flush()
    for word in ("one ", "two ", "three"):
        view.append("a", word)
        assert push_all(coalescer, view) is False  # appends only: the timer decides
    assert coalescer.flush() == {
        "base": 1, "revision": 4, "ops": [["append", "a", "one two three"]],
    }


def test_appends_are_never_merged_across_other_ops() -> None:
    view = view_with_blocks("a", "b")
    coalescer = Coalescer()
    base, _ = view.take_ops()
    ops = [["append", "a", "1"], ["append", "a", "2"], ["append", "b", "3"], ["append", "a", "4"],
           ["set", "a", {"state": "done"}], ["append", "a", "5"], ["meta", {"status": "x"}],
           ["append", "b", "6"], ["append", "b", "7"]]
    assert coalescer.push(2, ops, 2 + len(ops)) is True
    patch = coalescer.flush()
    assert patch == {"base": 2, "revision": 11, "ops": [
        ["append", "a", "12"], ["append", "b", "3"], ["append", "a", "4"],
        ["set", "a", {"state": "done"}], ["append", "a", "5"], ["meta", {"status": "x"}],
        ["append", "b", "67"]]}
    assert base == 0


def test_merging_continues_across_pushes() -> None:
    coalescer = Coalescer()
    coalescer.push(0, [["append", "a", "x"]], 1)
    coalescer.push(1, [["append", "a", "y"]], 2)
    coalescer.push(2, [["append", "a", "z"], ["append", "b", "w"]], 4)
    assert coalescer.flush() == {"base": 0, "revision": 4,
                                 "ops": [["append", "a", "xyz"], ["append", "b", "w"]]}


def test_boundary_ops_ask_for_an_immediate_flush() -> None:
    for op in (["add", {"id": "a", "kind": "text", "text": ""}], ["set", "a", {"state": "done"}],
               ["meta", {"status": "completed"}]):
        coalescer = Coalescer()
        assert coalescer.push(0, [["append", "a", "x"], op], 2) is True


def test_pending_tells_whether_a_patch_waits() -> None:
    coalescer = Coalescer()
    assert not coalescer.pending
    coalescer.push(0, [["append", "a", "x"]], 1)
    assert coalescer.pending
    assert coalescer.flush() is not None and not coalescer.pending


def test_flush_with_nothing_pending_is_none_and_flush_resets() -> None:
    coalescer = Coalescer()
    assert coalescer.flush() is None
    assert coalescer.push(0, [], 0) is False
    assert coalescer.flush() is None
    coalescer.push(0, [["append", "a", "x"]], 1)
    assert coalescer.flush() == {"base": 0, "revision": 1, "ops": [["append", "a", "x"]]}
    assert coalescer.flush() is None
    coalescer.push(1, [["append", "a", "y"]], 2)
    assert coalescer.flush() == {"base": 1, "revision": 2, "ops": [["append", "a", "y"]]}


def test_ops_that_do_not_continue_the_pending_patch_are_refused() -> None:
    coalescer = Coalescer()
    coalescer.push(0, [["append", "a", "x"]], 1)
    with pytest.raises(ValueError):
        coalescer.push(5, [["append", "a", "y"]], 6)
    with pytest.raises(ValueError):
        Coalescer().push(3, [], 4)
    with pytest.raises(ValueError):
        Coalescer(max_pending_ops=0)


def test_too_many_pending_ops_make_the_coalescer_urgent() -> None:
    coalescer = Coalescer(max_pending_ops=10)
    revision = 0
    urgent = []
    for i in range(12):
        block = "ab"[i % 2]  # alternating blocks: nothing merges
        urgent.append(coalescer.push(revision, [["append", block, "x"]], revision + 1))
        revision += 1
    assert urgent == [False] * 10 + [True, True]
    patch = coalescer.flush()
    assert patch is not None and len(patch["ops"]) == 12
    assert coalescer.push(12, [["append", "a", "x"]], 13) is False  # the count restarts


def test_merged_text_is_joined_once_per_flush() -> None:
    """100,000 appends cost one join at flush: the merge holds pieces, it never rebuilds text."""
    coalescer = Coalescer(max_pending_ops=10**6)
    for i in range(100_000):
        coalescer.push(i, [["append", "a", "x"]], i + 1)
    assert len(coalescer._ops) == 0 and len(coalescer._tail_text) == 100_000
    patch = coalescer.flush()
    assert patch is not None and patch["ops"] == [["append", "a", "x" * 100_000]]


# --- property: coalesced patches rebuild the view exactly ----------------------------------

view_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.sampled_from("abc"), st.text(max_size=3)),
        st.tuples(st.just("set"), st.sampled_from("abc"), st.sampled_from(["s", "t", "done"])),
        st.tuples(st.just("meta"), st.just(""), st.sampled_from(["in_progress", "completed"])),
        st.tuples(st.just("take"), st.just(""), st.just("")),
        st.tuples(st.just("tick"), st.just(""), st.just("")),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(actions=view_ops, interval=st.sampled_from([0.0, 0.02, 1.0]),
       max_pending=st.integers(1, 8))
def test_coalesced_patches_rebuild_the_view(
    actions: list[tuple[str, str, str]], interval: float, max_pending: int
) -> None:
    view = view_with_blocks("a", "b", "c")
    client = copy.deepcopy(EMPTY_VIEW)
    coalescer = Coalescer(max_pending_ops=max_pending)
    policy = FlushPolicy(interval)
    now = 0.0
    sent = 0

    def send() -> None:
        nonlocal sent
        patch = coalescer.flush()
        policy.flushed(now, sent=patch is not None)
        if patch is not None:
            assert apply_patch(client, patch)
            sent += 1

    def take() -> None:
        base, ops = view.take_ops()
        if ops and (coalescer.push(base, ops, view.revision) | policy.push(now, changed=True)):
            send()

    for kind, block, value in actions:
        if kind == "append":
            view.append(block, value)
        elif kind == "set":
            view.set(block, {"state": value})
        elif kind == "meta":
            view.set_meta({"status": value})
        elif kind == "take":
            take()
        else:
            now += 0.01
            if policy.due(now):
                send()
    take()
    send()
    assert client == view.to_dict()

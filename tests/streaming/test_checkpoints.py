"""What a checkpoint holds, decided once (streaming/checkpoints.py): a base, then ops rows that
chain, a base again every `chain_max` rows, the Response once per response, and a row still
open to the writer's round taking every capture before it, without a hole or a lost snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from responses_app.streaming.checkpoints import CheckpointBuilder, CheckpointRow, merge_appends
from responses_app.streaming.transcript import Transcript
from responses_app.streaming.view import apply_op

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sim"


def blocks(name: str) -> list[bytes]:
    body = (FIXTURES / name).read_bytes()
    return [block + b"\n\n" for block in body.split(b"\n\n") if block.strip()]


class Relay:
    """A transcript, its patches published as the relay sends them, and a builder beside it."""

    def __init__(self, chain_max: int = 4) -> None:
        self.transcript = Transcript()
        self.builder = CheckpointBuilder(chain_max)

    def feed(self, chunk: bytes) -> None:
        change = self.transcript.feed(chunk).change
        if change.ops:
            self.builder.published({"base": change.base, "ops": change.ops, "revision": change.revision})

    def capture(self, reason: str = "interval") -> CheckpointRow | None:
        return self.builder.capture(self.transcript, reason)


def materialise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A reader's view at the last row: its latest base with the ops after it applied in order."""
    view: dict[str, Any] | None = None
    for row in rows:
        if row["base_revision"] is None:
            view = orjson.loads(row["view"])
        else:
            assert view is not None and view["revision"] == row["base_revision"], "a hole in the chain"
            for op in orjson.loads(row["ops"]):
                apply_op(view, op)
            view["revision"] = row["revision"]
    assert view is not None
    return view


def test_a_base_then_ops_rows_that_chain_and_every_stored_revision_materialises() -> None:
    relay = Relay(chain_max=4)
    rows = []
    for i, chunk in enumerate(blocks("sim-long.sse")):
        relay.feed(chunk)
        if i % 25 == 24:
            row = relay.capture()
            assert row is not None
            rows.append(row.seal())  # the writer's round takes each row before the next capture
            assert materialise(rows) == relay.transcript.view.to_dict()
    row = relay.capture("terminal")
    assert row is not None
    rows.append(row.seal())
    assert materialise(rows) == relay.transcript.view.to_dict()
    assert [r["base_revision"] is None for r in rows[:11]] == [i % 5 == 0 for i in range(11)]
    # Each ops row holds its text once (appends merged across patches) and little else.
    for r in rows:
        if r["ops"] is not None:
            ops = orjson.loads(r["ops"])
            assert sum(op[0] == "append" for op in ops) <= 1 + sum(op[0] != "append" for op in ops)
    assert [r["snapshot"] is not None for r in rows].count(True) == 1, "the Response once"
    assert orjson.loads(rows[-1]["snapshot"])["status"] == "completed"


def test_nothing_changed_is_no_row() -> None:
    relay = Relay()
    relay.feed(b"".join(blocks("sim-long.sse")[:10]))
    assert relay.capture() is not None
    assert relay.capture() is None


def test_a_capture_before_the_round_goes_into_the_open_row() -> None:
    relay = Relay()
    chunks = blocks("sim-long.sse")
    relay.feed(b"".join(chunks[:10]))
    first = relay.capture()
    assert first is not None and first.view is not None
    relay.feed(b"".join(chunks[10:20]))
    assert relay.capture() is first, "not taken yet: the same row, now a base at the new revision"
    sealed = first.seal()
    assert orjson.loads(sealed["view"]) == relay.transcript.view.to_dict()
    relay.feed(b"".join(chunks[20:30]))
    second = relay.capture()
    assert second is not None and second is not first and second.base_revision == first.revision
    relay.feed(b"".join(chunks[30:40]))
    assert relay.capture() is second, "an ops row is extended"
    relay.feed(b"".join(chunks[40:50]))
    assert relay.capture("boundary") is second and second.reason == "boundary"
    assert materialise([sealed, second.seal()]) == relay.transcript.view.to_dict()
    assert len(orjson.loads(second.seal()["ops"])) == 1, "thirty deltas of one block: one append"


def test_the_open_row_keeps_the_snapshot_a_capture_put_in_it() -> None:
    """A response ended (its snapshot captured), then the request's terminal checkpoint (none: one
    per response), both before the round: the row keeps the snapshot."""
    for open_is_base in (True, False):
        relay = Relay()
        chunks = blocks("sim-text.sse")
        relay.feed(chunks[0])
        if not open_is_base:  # a base the writer took: the next row holds ops
            base = relay.capture()
            assert base is not None
            base.seal()
        for chunk in chunks[1:]:
            relay.feed(chunk)
        ended = relay.capture("boundary")
        assert ended is not None and ended.snapshot is not None
        relay.transcript.view.set_meta({"status": "completed", "usage": {"total_tokens": 3}})
        change = relay.transcript.take_ops()
        relay.builder.published({"base": change.base, "ops": change.ops, "revision": change.revision})
        assert relay.capture("terminal") is ended
        assert ended.snapshot is not None and orjson.loads(ended.snapshot)["status"] == "completed"
        assert (ended.view is None) is (not open_is_base)


def test_ops_that_do_not_continue_make_the_next_row_a_base() -> None:
    relay = Relay()
    chunks = blocks("sim-long.sse")
    relay.feed(b"".join(chunks[:10]))
    assert relay.capture() is not None
    relay.builder._open.seal()  # type: ignore[union-attr]
    lost = relay.transcript.feed(b"".join(chunks[10:20])).change  # a patch the builder never saw
    relay.transcript.view.set_meta({"seen": True})
    change = relay.transcript.take_ops()
    relay.builder.published({"base": change.base, "ops": change.ops, "revision": change.revision})
    assert lost.base < change.base
    row = relay.capture()
    assert row is not None and row.base_revision is None and row.view is not None


def test_appends_are_merged_only_where_adjacent_and_to_one_block() -> None:
    ops: list[list[Any]] = [["append", "a", "1"], ["append", "a", "2"], ["append", "b", "3"], ["set", "b", {"x": 1}],
           ["append", "b", "4"], ["append", "b", "5"], ["append", "b", "6"]]
    assert merge_appends(ops) == [["append", "a", "12"], ["append", "b", "3"], ["set", "b", {"x": 1}],
                                  ["append", "b", "456"]]
    assert merge_appends([]) == [] and merge_appends([["meta", {}]]) == [["meta", {}]]
    assert ops[0] == ["append", "a", "1"], "the patches' own ops are not changed"

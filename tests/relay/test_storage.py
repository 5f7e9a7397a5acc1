"""Storage linear in the answer: checkpoints after a base hold only the ops since the previous one,
the writer merges a round's states without breaking the chain, every stored revision
materialises, rows of the old format still read, and event batches round-trip byte-exact
through their compression."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from responses_app import selectors, services, storage
from responses_app.models import Checkpoint, EventRecord, RawJSON
from responses_app.relay import checkpoints
from responses_app.relay.dbthreads import db_writer
from responses_app.relay.hub import get_hub
from responses_app.relay.runner import StreamRunner
from responses_app.relay.writer import CheckpointWriter, merge_states
from tests.relay.helpers import make_request, reload

Row = tuple[int, int | None, Any, Any]


@sync_to_async
def rows_of(request_id: Any) -> list[Checkpoint]:
    return list(Checkpoint.objects.filter(request_id=request_id).order_by("revision"))


def chain(rows: list[Checkpoint]) -> list[Row]:
    return [(r.revision, r.base_revision, r.view, r.ops) for r in rows]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("relay_settings")
async def test_a_streamed_answer_is_stored_as_a_base_then_ops_and_every_revision_materialises(
    owner: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.RELAY_CHECKPOINT_INTERVAL_MS = 50
    settings.RELAY_CHECKPOINT_MIN_EVENTS = 8
    settings.RELAY_CHECKPOINT_GATHER_MS = 0  # a row per checkpoint: a gathered round merges them
    monkeypatch.setattr(checkpoints, "CHAIN_MAX", 4)
    request = await make_request(owner, "sim-long", {"sim.tokens": "300", "sim.tokens_per_s": "300"}, background=False)
    runner = StreamRunner(str(request.pk), get_hub())
    await runner.run()
    saved = await reload(request)
    assert saved.status == "completed"
    rows = await rows_of(saved.pk)
    assert len(rows) >= 10, [r.reason for r in rows]
    for i, row in enumerate(rows):
        if i % (checkpoints.CHAIN_MAX + 1) == 0:
            assert row.is_base and row.view["revision"] == row.revision and row.ops is None, i
        else:
            assert row.base_revision == rows[i - 1].revision and row.view is None and row.ops, i
        # the view at every stored revision, as a reader would have materialised it then
        view = selectors._view_from(chain(rows[: i + 1]))
        assert view is not None and view["revision"] == row.revision
    # the Response once, with the checkpoint after the response ended
    [ended] = [r for r in rows if r.snapshot is not None]
    assert ended.snapshot["status"] == "completed" and ended.revision == rows[-1].revision
    final = runner.view.to_dict()
    assert await sync_to_async(selectors.view_latest)(request=saved) == final
    text = "".join(b["text"] for b in final["blocks"] if b["kind"] == "text")
    assert text == saved.final_text and len(text) > 1000
    # Each ops row holds its text once (appends merged) and little else.
    ops_rows = [r for r in rows if not r.is_base]
    ops_bytes = sum(len(orjson.dumps(r.ops)) for r in ops_rows)
    appended = sum(len(op[2].encode()) for r in ops_rows for op in r.ops if op[0] == "append")
    assert appended <= len(text.encode()) and ops_bytes <= appended + 160 * len(ops_rows)


@pytest.mark.django_db(transaction=True)
async def test_the_writer_merges_a_rounds_states_into_one_row_that_continues_the_chain(owner: Any) -> None:
    request, _ = await sync_to_async(services.request_create)(
        owner=owner, input="Hi", model="sim-text", client_request_id=str(uuid.uuid4())
    )
    writer = CheckpointWriter(db_writer)
    view: dict[str, Any] = {
        "revision": 1,
        "meta": {"status": None},
        "blocks": [{"id": "b", "kind": "text", "text": ""}],
    }

    def base(revision: int) -> dict[str, Any]:
        return {
            "revision": revision,
            "sequence_number": revision,
            "reason": "boundary",
            "base_revision": None,
            "view": RawJSON(orjson.dumps(dict(view, revision=revision))),
            "ops": None,
            "snapshot": None,
        }

    def ops(base_revision: int, revision: int, added: list[list[Any]], **extra: Any) -> dict[str, Any]:
        return {
            "revision": revision,
            "sequence_number": revision,
            "reason": "interval",
            "base_revision": base_revision,
            "view": None,
            "ops": RawJSON(orjson.dumps(added)),
            "snapshot": None,
            **extra,
        }

    # One round: a base and two ops rows after it become one base (submitted before the round runs).
    futures = [
        writer.submit(request.pk, base(1), None),
        writer.submit(request.pk, ops(1, 2, [["append", "b", "ab"]]), None),
        writer.submit(request.pk, ops(2, 4, [["append", "b", "c"], ["meta", {"status": "x"}]]), None),
    ]
    await asyncio.gather(*futures)
    # The next: two ops rows become one on the base's revision, the terminal's Response kept.
    futures = [
        writer.submit(request.pk, ops(4, 5, [["append", "b", "d"]]), None),
        writer.submit(request.pk, ops(5, 6, [], reason="terminal", snapshot=RawJSON(b'{"status":"completed"}')), None),
        writer.submit(
            request.pk,
            ops(6, 7, [["set", "b", {"done": True}]], reason="terminal", snapshot=RawJSON(b'{"status":"completed"}')),
            None,
        ),
    ]
    await asyncio.gather(*futures)
    rows = await rows_of(request.pk)
    assert [(r.revision, r.base_revision, r.reason) for r in rows] == [(4, None, "interval"), (7, 4, "terminal")]
    assert rows[0].view["blocks"][0]["text"] == "abc" and rows[0].view["meta"]["status"] == "x"
    assert rows[1].ops == [["append", "b", "d"], ["set", "b", {"done": True}]]
    assert rows[1].snapshot == {"status": "completed"}
    latest = await sync_to_async(selectors.view_latest)(request=request)
    assert latest == {
        "revision": 7,
        "meta": {"status": "x"},
        "blocks": [{"id": "b", "kind": "text", "text": "abcd", "done": True}],
    }


def test_merging_ops_after_ops_joins_them_in_order() -> None:
    first = {"revision": 3, "base_revision": 1, "ops": RawJSON(b'[["append","b","x"]]'), "view": None}
    empty = {"revision": 3, "base_revision": 3, "ops": RawJSON(b"[]"), "view": None}
    second = {"revision": 5, "base_revision": 3, "ops": RawJSON(b'[["append","b","y"],["meta",{}]]'), "view": None}
    assert orjson.loads(bytes(merge_states(first, second)["ops"])) == [
        ["append", "b", "x"],
        ["append", "b", "y"],
        ["meta", {}],
    ]
    assert merge_states(first, second)["base_revision"] == 1
    assert orjson.loads(bytes(merge_states(empty, second)["ops"])) == orjson.loads(bytes(second["ops"]))
    assert orjson.loads(bytes(merge_states(first, dict(empty, revision=3))["ops"])) == orjson.loads(bytes(first["ops"]))
    assert merge_states(None, second) is second


@pytest.mark.parametrize("newer_is_base", [False, True], ids=["ops", "base"])
@pytest.mark.parametrize("older_is_base", [False, True], ids=["after-ops", "after-base"])
def test_merging_keeps_the_snapshot_an_older_state_carried(older_is_base: bool, newer_is_base: bool) -> None:
    """A response ended (its snapshot captured), then the request's terminal checkpoint (none:
    stored once per response), both in one round: the merged row keeps the snapshot. Seen on
    PostgreSQL in the safety test of a phrase cut by a window, where the flag ends both at once."""
    snapshot = RawJSON(b'{"id":"resp_1","status":"incomplete"}')
    older: dict[str, Any] = {"revision": 3, "base_revision": None if older_is_base else 1, "snapshot": snapshot,
                             "view": RawJSON(b'{"revision":1,"blocks":[],"meta":{}}') if older_is_base else None,
                             "ops": None if older_is_base else RawJSON(b'[["meta",{}]]')}
    newer: dict[str, Any] = {"revision": 5, "base_revision": None if newer_is_base else 3, "snapshot": None,
                             "view": RawJSON(b'{"revision":5,"blocks":[]}') if newer_is_base else None,
                             "ops": None if newer_is_base else RawJSON(b'[["meta",{"a":1}]]')}
    merged = merge_states(older, newer)
    assert merged["snapshot"] is snapshot and merged["revision"] == 5
    own = RawJSON(b'{"id":"resp_2","status":"completed"}')
    assert merge_states(older, dict(newer, snapshot=own))["snapshot"] is own, "a newer snapshot wins"


@pytest.mark.django_db
def test_rows_of_the_old_format_read_beside_new_ones(owner: Any) -> None:
    old, _ = services.request_create(owner=owner, input="Hi", model="sim-text", client_request_id="old")
    mixed, _ = services.request_create(owner=owner, input="Hi", model="sim-text", client_request_id="mixed")
    for revision, text in ((3, "He"), (9, "Hello")):  # the old format: the whole view and snapshot each time
        Checkpoint.objects.create(
            request=old,
            revision=revision,
            reason="interval",
            snapshot={"output": []},
            view={"revision": revision, "meta": {}, "blocks": [{"id": "b", "text": text}]},
        )
    Checkpoint.objects.create(
        request=mixed,
        revision=2,
        reason="interval",
        snapshot={},
        view={"revision": 2, "meta": {}, "blocks": [{"id": "b", "text": "a"}]},
    )
    Checkpoint.objects.create(
        request=mixed,
        revision=4,
        reason="interval",
        base_revision=2,
        ops=[["append", "b", "b"], ["add", {"id": "c", "text": ""}]],
    )
    Checkpoint.objects.create(
        request=mixed,
        revision=5,
        reason="terminal",
        base_revision=4,
        ops=[["append", "c", "z"]],
        snapshot={"status": "completed"},
    )
    views = selectors.views_latest(request_ids=[old.pk, mixed.pk])
    assert views[old.pk]["blocks"] == [{"id": "b", "text": "Hello"}] and views[old.pk]["revision"] == 9
    assert views[mixed.pk] == {
        "revision": 5,
        "meta": {},
        "blocks": [{"id": "b", "text": "ab"}, {"id": "c", "text": "z"}],
    }
    EventRecord.objects.create(request=mixed, count=1, data='data: {"type":"old"}\n\n')  # the old format
    services.checkpoints_commit_many(
        items=[
            (
                mixed.pk,
                None,
                [
                    {
                        "segment_index": 0,
                        "first_sequence": 1,
                        "last_sequence": 1,
                        "count": 1,
                        "data": b'data: {"type":"new"}\n\n',
                    }
                ],
            )
        ]
    )
    record = EventRecord.objects.filter(request=mixed).order_by("id").last()
    assert record is not None and record.data == "" and bytes(record.compressed).startswith(b"\x28\xb5\x2f\xfd")
    assert selectors.event_log_text(request_id=mixed.pk) == 'data: {"type":"old"}\n\ndata: {"type":"new"}\n\n'


def test_a_broken_chain_stops_at_the_last_consistent_view() -> None:
    rows: list[Row] = [
        (2, None, {"revision": 2, "meta": {}, "blocks": [{"id": "b", "text": "a"}]}, None),
        (3, 2, None, [["append", "b", "b"]]),
        (6, 4, None, [["append", "b", "lost"]]),
    ]
    assert selectors._view_from(rows) == {"revision": 3, "meta": {}, "blocks": [{"id": "b", "text": "ab"}]}
    assert selectors._view_from(rows[1:]) is None


@given(st.lists(st.binary(max_size=600), max_size=8))
def test_event_batches_round_trip_byte_exact_through_compression(batches: list[bytes]) -> None:
    for data in batches:
        frame = storage.log_compress(data)
        assert storage.log_bytes("", frame) == data
        assert storage.log_text("", frame).encode("utf-8", "surrogateescape") == data
    text = 'data: {"delta":"é\\u0000"}\n\n'
    assert storage.log_text(text, None) == text and storage.log_bytes(text, None) == text.encode()


@pytest.mark.django_db
@hypothesis_settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=400), min_size=1, max_size=5))
def test_the_stored_log_reads_back_byte_exact_whatever_the_bytes(owner: Any, batches: list[bytes]) -> None:
    request, _ = services.request_create(owner=owner, input="Hi", model="sim-text", client_request_id=str(uuid.uuid4()))
    services.checkpoints_commit_many(items=[(request.pk, None, [
        {"segment_index": 0, "first_sequence": i, "last_sequence": i, "count": 1, "data": data}
        for i, data in enumerate(batches)])])
    assert b"".join(data for _round, data in selectors.event_log_by_round(request_id=request.pk)) == b"".join(batches)
    text = selectors.event_log_text(request_id=request.pk)
    assert text.encode("utf-8", "surrogateescape") == b"".join(batches)

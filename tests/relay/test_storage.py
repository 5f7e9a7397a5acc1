"""Storage linear in the answer: checkpoints after a base hold only the ops since the previous one,
a round's captures land as one row that continues the chain, every stored revision
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
from responses_app.models import Checkpoint, EventRecord
from responses_app.relay.checkpoint_writer import CheckpointWriter
from responses_app.relay.dbthreads import db_writer
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.streaming import checkpoints
from responses_app.streaming.checkpoints import CheckpointBuilder
from responses_app.streaming.transcript import Transcript
from tests.relay.helpers import make_request, reload
from tests.streaming.test_checkpoints import blocks

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
    monkeypatch.setattr(checkpoints, "CHAIN_MAX", 4)  # read by each runner's builder
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
async def test_a_rounds_captures_land_as_one_row_that_continues_the_chain(owner: Any) -> None:
    request, _ = await sync_to_async(services.request_create)(
        owner=owner, input="Hi", model="sim-text", client_request_id=str(uuid.uuid4())
    )
    writer = CheckpointWriter(db_writer, gather_s=10.0)  # a round only when hurried
    transcript, builder = Transcript(), CheckpointBuilder()
    chunks = blocks("sim-text.sse")
    submitted: list[Any] = [None]

    def capture(reason: str) -> Any:
        row = builder.capture(transcript, reason)  # as relay/checkpointer.py: a row is submitted once
        future = writer.submit(request.pk, None if row is submitted[0] else row, None)
        submitted[0] = row
        return future

    def feed_and_capture(part: list[bytes], reason: str) -> Any:
        for chunk in part:
            change = transcript.feed(chunk).change
            builder.published({"base": change.base, "ops": change.ops, "revision": change.revision})
        return capture(reason)

    await feed_and_capture(chunks[:2], "boundary")  # idle: a round at once, a base
    # A round: two captures before it, one ops row.
    futures = [feed_and_capture(chunks[2:4], "interval"), feed_and_capture(chunks[4:6], "interval")]
    writer.hurry()
    await asyncio.gather(*futures)
    # The next: the response's end (its snapshot), then the terminal capture (none): one row, keeping it.
    futures = [feed_and_capture(chunks[6:-1], "boundary"), feed_and_capture(chunks[-1:], "boundary")]
    transcript.view.set_meta({"status": "completed", "usage": {"total_tokens": 9}})
    change = transcript.take_ops()
    builder.published({"base": change.base, "ops": change.ops, "revision": change.revision})
    futures.append(capture("terminal"))
    writer.hurry()
    await asyncio.gather(*futures)
    rows = await rows_of(request.pk)
    assert [(r.base_revision is None, r.reason) for r in rows] == [(True, "boundary"), (False, "interval"),
                                                                   (False, "terminal")]
    assert [r.base_revision for r in rows[1:]] == [rows[0].revision, rows[1].revision]
    assert rows[2].revision == transcript.view.revision
    assert rows[2].snapshot is not None and rows[2].snapshot["status"] == "completed", "the snapshot is kept"
    latest = await sync_to_async(selectors.view_latest)(request=request)
    assert latest == transcript.view.to_dict()


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
                [],
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
    services.checkpoints_commit_many(items=[(request.pk, [], [
        {"segment_index": 0, "first_sequence": i, "last_sequence": i, "count": 1, "data": data}
        for i, data in enumerate(batches)])])
    assert b"".join(data for _round, data in selectors.event_log_by_round(request_id=request.pk)) == b"".join(batches)
    text = selectors.event_log_text(request_id=request.pk)
    assert text.encode("utf-8", "surrogateescape") == b"".join(batches)

"""The checkpoint writer never leaves a hole: failed rounds are retried, each request's rows are
isolated, a request whose rows are refused is told so, and what PostgreSQL's text and jsonb
refuse (U+0000, bytes that are not UTF-8, lone surrogates) is stored and read back unchanged."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError, connection
from django.utils import timezone

from responses_app import services, storage
from responses_app.models import Checkpoint, EventRecord, ResponseRequest
from responses_app.relay.checkpoint_writer import CheckpointNotWritten, CheckpointWriter
from responses_app.relay.dbthreads import db_writer
from responses_app.streaming.checkpoints import CheckpointRow

pytestmark = pytest.mark.django_db(transaction=True)

NASTY = ["nul \x00 inside", "\x00", storage.MARK + "looks escaped", "back\\slash \\0 \\u0000",
         "lone \ud800 high", "lone \udfff low", "emoji 😀 and \x00 together"]


def needs_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL is what refuses these values (the relay's tests run again on it)")


@sync_to_async
def new_request(owner: Any, text: Any = "Hello") -> ResponseRequest:
    request, _ = services.request_create(owner=owner, input=text, model="sim-text",
                                         client_request_id=str(uuid.uuid4()))
    return request


def batch(data: bytes, first: int) -> dict[str, Any]:
    return {"segment_index": 0, "first_sequence": first, "last_sequence": first, "count": 1, "data": data}


def state(revision: int, view: Any) -> CheckpointRow:
    return CheckpointRow(revision, revision, "interval", view=orjson.dumps(view), snapshot=orjson.dumps({"output": []}))


@sync_to_async
def stored(request_id: uuid.UUID) -> tuple[list[str], list[Any]]:
    data = [record.text for record in EventRecord.objects.filter(request_id=request_id).order_by("id")]
    views = list(Checkpoint.objects.filter(request_id=request_id).order_by("revision").values_list("view", flat=True))
    return data, views


async def test_two_concurrent_requests_keep_what_postgresql_refuses(owner: Any) -> None:
    needs_postgresql()
    nasty_input = [{"role": "user", "content": text} for text in NASTY]
    first, second = await new_request(owner, nasty_input), await new_request(owner)
    writer = CheckpointWriter(db_writer)
    raw = [b'data: {"delta":"\\u0000"}\n\n', b"data: raw \x00 nul\n\n", b"data: not utf-8 \xff\xfe\n\n",
           storage.MARK.encode() + b" data"]
    # orjson never serialises a lone surrogate: those reach the database through input and final_text
    view = {"blocks": [{"kind": "text", "text": text} for text in NASTY if not storage._SURROGATE.search(text)],
            "key \x00": "\x00"}
    futures = []
    for i, data in enumerate(raw):
        futures.append(writer.submit(first.id, state(i + 1, view), batch(data, i)))
        futures.append(writer.submit(second.id, state(i + 1, {"blocks": [], "n": i}), batch(b"data: {}\n\n", i)))
    await asyncio.gather(*futures)
    data, views = await stored(first.id)
    assert [text.encode("utf-8", "surrogateescape") for text in data] == raw
    assert views[-1] == view
    data, views = await stored(second.id)
    assert data == ["data: {}\n\n"] * len(raw) and views[-1] == {"blocks": [], "n": len(raw) - 1}

    final = "".join(NASTY)
    await sync_to_async(services.request_mark_terminal)(request_id=first.id, token=None, status="completed",
                                                        at=timezone.now(), final_text=final, error_message=final)
    again = await sync_to_async(ResponseRequest.objects.get)(pk=first.id)
    assert again.input == nasty_input
    assert again.final_text == final and again.error_message == final


async def test_a_refused_row_fails_only_its_own_request(owner: Any) -> None:
    bad, good = await new_request(owner), await new_request(owner)
    writer = CheckpointWriter(db_writer)
    refused = writer.submit(bad.id, state(-1, {}), batch(b"data: {}\n\n", 1))  # CHECK >= 0
    written = writer.submit(good.id, state(1, {"ok": True}), batch(b"data: {}\n\n", 1))
    await written
    with pytest.raises(CheckpointNotWritten) as caught:
        await refused
    assert caught.value.request_id == bad.id
    assert await stored(good.id) == (["data: {}\n\n"], [{"ok": True}])
    assert await stored(bad.id) == ([], [])
    # Later events for it would follow the lost ones: refused at once, not written with a hole.
    with pytest.raises(CheckpointNotWritten):
        await writer.submit(bad.id, state(2, {}), batch(b"data: {}\n\n", 2))
    assert await stored(bad.id) == ([], [])


async def test_a_deleted_request_does_not_take_the_round_down(owner: Any) -> None:
    needs_postgresql()  # deferred foreign keys: checked at COMMIT unless the writer says otherwise
    gone, kept = await new_request(owner), await new_request(owner)
    await sync_to_async(ResponseRequest.objects.filter(pk=gone.id).delete)()
    writer = CheckpointWriter(db_writer)
    lost = writer.submit(gone.id, state(1, {}), batch(b"data: {}\n\n", 1))
    await writer.submit(kept.id, state(1, {"kept": 1}), batch(b"data: {}\n\n", 1))
    with pytest.raises(CheckpointNotWritten):
        await lost
    assert await stored(kept.id) == (["data: {}\n\n"], [{"kept": 1}])


def flaky(failures: int) -> tuple[Callable[[Callable[..., Any]], Callable[..., Any]], list[int]]:
    """`db_writer`, but the first `failures` rounds fail as if the database were away."""
    calls = [0]

    def run_db(fn: Callable[..., Any]) -> Callable[..., Any]:
        real = db_writer(fn)

        async def call(**kwargs: Any) -> Any:
            calls[0] += 1
            if calls[0] <= failures:
                raise OperationalError("the database went away")
            return await real(**kwargs)

        return call

    return run_db, calls


async def test_a_failed_round_is_retried_and_loses_nothing(owner: Any) -> None:
    request = await new_request(owner)
    run_db, calls = flaky(3)
    writer = CheckpointWriter(run_db, retry_first_s=0.01, retry_max_s=0.05)
    first = writer.submit(request.id, state(1, {"n": 1}), batch(b"data: 1\n\n", 1))
    while calls[0] < 2:
        await asyncio.sleep(0.005)
    assert not first.done()  # kept, not dropped: the runner's backpressure waits on this
    second = writer.submit(request.id, state(2, {"n": 2}), batch(b"data: 2\n\n", 2))
    await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert calls[0] >= 4 and writer.failed_rounds == 3
    assert await stored(request.id) == (["data: 1\n\n", "data: 2\n\n"], [{"n": 1}, {"n": 2}]), "in order"


async def test_the_writer_gives_up_with_a_specific_error() -> None:
    request_id = uuid.uuid4()
    run_db, _calls = flaky(10**9)
    writer = CheckpointWriter(run_db, give_up_s=0.2, retry_first_s=0.01, retry_max_s=0.05)
    with pytest.raises(CheckpointNotWritten) as caught:
        await asyncio.wait_for(writer.submit(request_id, None, batch(b"data: 1\n\n", 1)), 10)
    assert isinstance(caught.value.cause, OperationalError)
    with pytest.raises(CheckpointNotWritten):
        await writer.submit(request_id, None, batch(b"data: 2\n\n", 2))


async def test_rounds_are_gathered_and_a_waiting_runner_hurries_the_next(owner: Any) -> None:
    request = await new_request(owner)
    run_db, calls = flaky(0)
    writer = CheckpointWriter(run_db, gather_s=0.5)
    loop = asyncio.get_running_loop()
    await writer.submit(request.id, state(1, {"n": 1}), batch(b"data: 1\n\n", 1))  # idle: at once
    assert calls[0] == 1
    # Submitted one after another while the gather runs: one round for all of them.
    futures = []
    for n in range(2, 6):
        futures.append(writer.submit(request.id, state(n, {"n": n}), batch(f"data: {n}\n\n".encode(), n)))
        await asyncio.sleep(0)  # a loop turn each: 20 ms sleeps outran the 0.5 s gather on CI
    await asyncio.wait_for(asyncio.gather(*futures), 10)
    assert calls[0] == 2 and writer.rounds == 2
    # A runner waiting for its rows (its terminal checkpoint, backpressure) does not wait for the gather.
    gathered_until = writer._round_started + writer.gather_s
    late = writer.submit(request.id, state(6, {"n": 6}), batch(b"data: 6\n\n", 6))
    writer.hurry()
    await asyncio.wait_for(late, 10)
    assert loop.time() < gathered_until and calls[0] == 3
    data, views = await stored(request.id)
    assert data == [f"data: {n}\n\n" for n in range(1, 7)] and views[-1] == {"n": 6}

"""The simulator's memory is bounded whatever it serves: finished responses are kept packed, within
the store's byte budget, and everything that reads them (retrieve, resume, cancel, chains) works
on packed ones as on live ones. Driven in-process through the ASGI interface."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from typing import Any

import orjson

from responses_app.simulator.app import create_app
from responses_app.simulator.inprocess import request
from responses_app.simulator.store import Store
from tests.simulator.helpers import check_invariants, parse

MB = 1024 * 1024


def _create(model: str, n: int, **extra: Any) -> dict[str, Any]:
    metadata = {"sim.tokens_per_s": "0", "sim.seed": str(n), **extra.pop("metadata", {})}
    return {"model": model, "input": f"question {n}", "stream": True, "metadata": metadata, **extra}


async def _serve(app: Any, count: int) -> None:
    for n in range(count):
        model = "sim-long" if n % 50 == 0 else "sim-text"
        extra = {"metadata": {"sim.tokens": "1000"}} if model == "sim-long" else {}
        # the relay's way: background, streamed, read to the end
        status, _ = await request(app, "POST", "/v1/responses", _create(model, n, background=True, **extra))
        assert status == 200


def test_thousands_of_responses_stay_within_a_few_tens_of_mb() -> None:
    async def main() -> tuple[int, Store]:
        app = create_app()
        await _serve(app, 20)  # warm up: imports, caches
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            await _serve(app, 2000)
            await asyncio.sleep(0)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        return grown, app.store

    grown, store = asyncio.run(main())
    assert grown < 32 * MB, f"{grown / MB:.1f} MB retained by {len(store)} responses"
    assert 0 < store.bytes <= store.max_bytes


def test_the_budget_evicts_the_oldest_and_the_kept_ones_work_packed() -> None:
    async def main() -> None:
        store = Store(max_bytes=MB // 2)
        app = create_app(store)
        streams = {}
        for n in range(150):
            status, data = await request(app, "POST", "/v1/responses", _create("sim-text", n, background=True))
            streams[n] = parse(data)
        assert 0 < store.bytes <= MB // 2 and 50 < len(store) < 150
        oldest = streams[0][0]["response"]["id"]
        status, _ = await request(app, "GET", f"/v1/responses/{oldest}")
        assert status == 404
        newest = streams[149]
        resp_id = newest[0]["response"]["id"]
        assert store.get(resp_id) is not None and store.get(resp_id).packed  # type: ignore[union-attr]
        status, data = await request(app, "GET", f"/v1/responses/{resp_id}")
        assert status == 200 and orjson.loads(data) == newest[-1]["response"]
        status, data = await request(app, "GET", f"/v1/responses/{resp_id}", query=b"stream=true&starting_after=4")
        assert status == 200 and parse(data) == newest[5:]
        status, data = await request(app, "POST", f"/v1/responses/{resp_id}/cancel")
        assert status == 400 and b"completed" in data  # as for a live finished one

    asyncio.run(main())


def test_chains_continue_from_packed_responses() -> None:
    async def main() -> None:
        app = create_app()
        status, data = await request(app, "POST", "/v1/responses", _create("sim-function", 1))
        first = parse(data)[-1]["response"]
        assert app.store.get(first["id"]).packed  # type: ignore[union-attr]
        call = next(i for i in first["output"] if i["type"] == "function_call")
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"}
        status, data = await request(app, "POST", "/v1/responses", _create(
            "sim-function", 2, input=[output], previous_response_id=first["id"]))
        assert status == 200
        check_invariants(parse(data))
        assert "21 C" in parse(data)[-1]["response"]["output"][0]["content"][0]["text"]

        status, data = await request(app, "POST", "/v1/responses", _create("sim-mcp-approval", 3))
        asked = parse(data)[-1]["response"]
        approval = next(i for i in asked["output"] if i["type"] == "mcp_approval_request")
        answer = {"type": "mcp_approval_response", "approval_request_id": approval["id"], "approve": True}
        status, data = await request(app, "POST", "/v1/responses", _create(
            "sim-mcp-approval", 4, input=[answer], previous_response_id=asked["id"]))
        assert status == 200
        assert any(i["type"] == "mcp_call" for i in parse(data)[-1]["response"]["output"])

    asyncio.run(main())


def test_a_reader_behind_a_finished_response_still_gets_every_event() -> None:
    async def main() -> None:
        app = create_app()
        body = _create("sim-long", 5, background=True, metadata={"sim.tokens": "3000"})
        status, data = await request(app, "POST", "/v1/responses", body)
        events = parse(data)
        check_invariants(events)
        resp = app.store.get(events[0]["response"]["id"])
        assert resp is not None and resp.packed and resp.readers == 0
        # a resume from the start of a packed log gives the whole stream again
        status, again = await request(app, "GET", f"/v1/responses/{resp.id}", query=b"stream=true")
        assert parse(again) == events

    asyncio.run(main())

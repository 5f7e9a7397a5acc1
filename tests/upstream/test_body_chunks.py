"""`upstream.body_chunks`: the streamed body read straight from aiohttp, holding no chunk between
reads (bench storage: a quiet stream kept its last read, up to 16 KiB, in httpx's generators),
against the standalone simulator over real loopback HTTP."""

from __future__ import annotations

import sys
from typing import Any

import httpx
import orjson
import pytest

from responses_app.simulator.auth import DEV_API_KEY
from responses_app.upstream.http import Upstream, _AiohttpChunks, body_chunks

pytestmark = pytest.mark.usefixtures("relay_settings")


def types(data: bytes) -> list[str]:
    """The SSE events' types, in order."""
    return [orjson.loads(line[6:])["type"] for line in data.splitlines() if line.startswith(b"data: ")]


def body(metadata: dict[str, str] | None = None) -> dict[str, Any]:
    return {"model": "sim-text", "input": "Say something.", "store": True,
            "metadata": {"sim.seed": "7", **(metadata or {})}}


async def read(upstream: Upstream, metadata: dict[str, str] | None, direct: bool) -> tuple[bytes, list[int], str]:
    """The body, the reference count of each chunk as the reader sees it, and how it ended."""
    data, refs, ending = bytearray(), [], "end"
    async with upstream.create_stream(body(metadata)) as response:
        chunks = body_chunks(response) if direct else response.aiter_bytes()
        assert isinstance(chunks, _AiohttpChunks) is direct
        try:
            async for chunk in chunks:
                refs.append(sys.getrefcount(chunk))  # the loop's name and the call's argument: 2
                data += chunk
                del chunk
        except httpx.HTTPError as exc:
            ending = type(exc).__name__
    return bytes(data), refs, ending


async def test_the_direct_reader_yields_the_same_body_and_holds_no_chunk(simulator_url: str) -> None:
    upstream = Upstream(base=simulator_url, api_key=DEV_API_KEY)
    try:
        direct, direct_refs, direct_end = await read(upstream, None, direct=True)
        through, through_refs, through_end = await read(upstream, None, direct=False)
    finally:
        await upstream.aclose()
    assert types(direct)[-1] == "response.completed"
    assert types(through) == types(direct)
    assert direct_end == through_end == "end"
    assert set(direct_refs) == {2}, "nothing but the reader holds the chunk"
    assert min(through_refs) > 2, "httpx's generators each hold the last chunk (what this avoids)"


async def test_a_dropped_stream_ends_as_through_httpx(simulator_url: str) -> None:
    upstream = Upstream(base=simulator_url, api_key=DEV_API_KEY)
    try:
        direct, _, direct_end = await read(upstream, {"sim.drop_after": "5"}, direct=True)
        through, _, through_end = await read(upstream, {"sim.drop_after": "5"}, direct=False)
    finally:
        await upstream.aclose()
    assert direct_end == through_end  # the simulator closes the body: no error either way, no terminal
    assert len(types(direct)) == len(types(through)) < 12


async def test_a_consumed_body_cannot_be_read_again(simulator_url: str) -> None:
    upstream = Upstream(base=simulator_url, api_key=DEV_API_KEY)
    try:
        async with upstream.create_stream(body()) as response:
            async for _ in body_chunks(response):
                break
            with pytest.raises(httpx.StreamConsumed):
                await response.aread()
    finally:
        await upstream.aclose()

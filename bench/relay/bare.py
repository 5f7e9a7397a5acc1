"""The least a relay can do on the stack ours runs on: the CPU section's lower bound.

A plain ASGI application (no Django, no Channels, no database), served like ours (uvicorn,
httptools, websockets-sansio, uvloop). Each websocket opens its own upstream stream through the
relay's own read path (httpx with the aiohttp transport, `upstream.body_chunks`), runs every
chunk through the streaming core's `StreamPipeline` (what the floor reader does too), and sends
one frame per DELTAS_PER_FRAME text deltas: no coalescing policy, no timer, no checkpoint, no event log, no
hub, no session. What it costs per relayed delta, over the floor, is the price of the frames
alone; the rest of ours (checkpoints, the event log, the patch stream, timers, the viewer's
bookkeeping) is what ours costs over this.

    python -m uvicorn --http httptools --ws websockets-sansio --loop uvloop bench.relay.bare:application

watched at `/ws/naive/?tokens_per_s=30&tokens=3000&seed=1&stamp=1`, in the naive relay's
message format plus `first`, the sequence number of the frame's first delta:
`{"type": "delta", "first": 11, "seq": 12, "delta": "<text>"}`.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any
from urllib.parse import parse_qs

import httpx
import orjson
from httpx_aiohttp import AiohttpTransport

from responses_app.simulator.auth import DEV_API_KEY
from responses_app.streaming.pipeline import StreamPipeline
from responses_app.upstream.http import body_chunks

UPSTREAM = os.environ.get("NAIVE_UPSTREAM", "http://127.0.0.1:8001/v1").rstrip("/")
# Deltas per frame: as many as ours sends at most, so this one sends at least as many frames
# (`--flush-as-stamped` sets 2; bench/README.md, "Stamped deltas and the flush setting").
DELTAS_PER_FRAME = int(os.environ.get("BARE_DELTAS_PER_FRAME", "5"))

_client: httpx.AsyncClient | None = None


def client() -> httpx.AsyncClient:
    global _client
    if _client is None:
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
        key = os.environ.get("SIMULATOR_API_KEY") or DEV_API_KEY
        _client = httpx.AsyncClient(transport=AiohttpTransport(limits=limits), timeout=None,
                                    headers={"authorization": f"Bearer {key}"})
    return _client


def upstream_body(query: dict[str, str]) -> dict[str, Any]:
    """The paced simulator request a viewer's query asks for (this relay's and the naive one's)."""
    metadata = {"sim.tokens_per_s": query.get("tokens_per_s", "30"), "sim.tokens": query.get("tokens", "3000"),
                "sim.seed": query.get("seed", "1")}
    if query.get("stamp"):
        metadata["sim.stamp"] = "true"
    return {"model": query.get("model", "sim-long"), "input": "Tell me something long.", "stream": True,
            "metadata": metadata}


async def relay(query: dict[str, str], send: Any) -> None:
    body = upstream_body(query)
    pipeline = StreamPipeline()
    take_ops = pipeline.assembler.view.take_ops
    texts: list[str] = []
    first = 0
    async with client().stream("POST", f"{UPSTREAM}/responses", content=orjson.dumps(body),
                               headers={"content-type": "application/json"}) as response:
        async for chunk in body_chunks(response):
            for event in pipeline.feed(chunk).events:
                if event["type"] == "response.output_text.delta":
                    if not texts:
                        first = event["sequence_number"]
                    texts.append(event["delta"])
                    if len(texts) >= DELTAS_PER_FRAME:
                        frame = {"type": "delta", "first": first, "seq": event["sequence_number"],
                                 "delta": "".join(texts)}
                        texts.clear()
                        await send({"type": "websocket.send", "text": orjson.dumps(frame).decode()})
            take_ops()  # the view's ops, as ours drains them (and drops them here)


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "websocket":
        return
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    query = {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
    pump = asyncio.get_running_loop().create_task(relay(query, send))
    try:
        while (await receive())["type"] != "websocket.disconnect":
            pass
    finally:
        pump.cancel()

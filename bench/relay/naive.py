"""The naive relay the relay benchmark compares against: how hand-rolled relays are usually written.

One Channels websocket consumer per viewer. On connect it opens the upstream stream itself with
httpx's default transport (`httpx.AsyncClient()`), reads it line by line, parses each SSE `data:`
line with the stdlib `json`, and does one `channel_layer.group_send` per text delta through the
in-memory channel layer (its defaults: capacity 100 per channel); the consumer's handler forwards
each message to its socket. No coalescing, no database, no checkpoints.

Served by its own single Daphne process:

    NAIVE_UPSTREAM=http://127.0.0.1:PORT/v1 daphne -b 127.0.0.1 -p 9000 bench.relay.naive:application

and watched at `/ws/naive/?tokens_per_s=30&tokens=3000&seed=1&stamp=1`; each message is
`{"type": "delta", "seq": <upstream sequence number>, "delta": "<text>"}`.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any
from urllib.parse import parse_qs

import django
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        INSTALLED_APPS=["channels"],
        CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
        USE_TZ=True,
    )
    django.setup()

import httpx  # noqa: E402
from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from bench.relay.bare import upstream_body  # noqa: E402
from responses_app.simulator.auth import DEV_API_KEY  # noqa: E402

UPSTREAM = os.environ.get("NAIVE_UPSTREAM", "http://127.0.0.1:8001/v1").rstrip("/")
UPSTREAM_AUTH = {"authorization": f"Bearer {os.environ.get('SIMULATOR_API_KEY') or DEV_API_KEY}"}


class NaiveRelayConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        query = {k: v[-1] for k, v in parse_qs(self.scope.get("query_string", b"").decode()).items()}
        self.group = f"naive.{uuid.uuid4().hex}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        body = upstream_body(query)
        self.pump = asyncio.get_running_loop().create_task(self._pump(body))

    async def _pump(self, body: dict[str, Any]) -> None:
        async with httpx.AsyncClient(headers=UPSTREAM_AUTH) as client:
            async with client.stream("POST", f"{UPSTREAM}/responses", json=body) as response:
                async for line in response.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    if event["type"] != "response.output_text.delta":
                        continue
                    text = json.dumps({"type": "delta", "seq": event["sequence_number"], "delta": event["delta"]})
                    await self.channel_layer.group_send(self.group, {"type": "relay.delta", "text": text})

    async def relay_delta(self, message: dict[str, Any]) -> None:
        await self.send(text_data=message["text"])

    async def disconnect(self, code: int) -> None:
        pump = getattr(self, "pump", None)
        if pump is not None:
            pump.cancel()
        await self.channel_layer.group_discard(self.group, self.channel_name)


application = ProtocolTypeRouter({
    "websocket": URLRouter([path("ws/naive/", NaiveRelayConsumer.as_asgi())]),
})

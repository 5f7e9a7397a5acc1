"""Helpers for relay tests: create requests, watch them over a real websocket communicator."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from responses_app import services
from responses_app.models import ResponseRequest
from responses_app.routing import websocket_urlpatterns
from responses_app.streaming.view import apply_patch
from responses_app.streaming.wire import PROTOCOL, decode

FAST = {"sim.tokens_per_s": "0", "sim.seed": "7"}


def ws_app() -> Any:
    return URLRouter(websocket_urlpatterns)


@sync_to_async
def make_request(user: Any, model: str = "sim-text", metadata: dict[str, str] | None = None,
                 background: bool = True, client_request_id: str | None = None,
                 text: str = "Hello there") -> ResponseRequest:
    conversation = services.conversation_create(owner=user)
    request, _ = services.request_create(
        owner=user, input=text, model=model, client_request_id=client_request_id or str(uuid.uuid4()),
        conversation=conversation, params={"background": background, "metadata": dict(FAST, **(metadata or {}))},
    )
    return request


@sync_to_async
def reload(request: ResponseRequest) -> ResponseRequest:
    return ResponseRequest.objects.get(pk=request.pk)


async def connect(user: Any, request_id: Any, query: str = "",
                  protocol: int | None = PROTOCOL) -> WebsocketCommunicator:
    """A socket to the request, naming the wire protocol it reads as chat.js does (None: none)."""
    params = [f"v={protocol}"] if protocol is not None else []
    params += [query] if query else []
    path = f"/ws/requests/{request_id}/" + (f"?{'&'.join(params)}" if params else "")
    communicator = WebsocketCommunicator(ws_app(), path)
    communicator.scope["user"] = user
    return communicator


class Watcher:
    """A client that keeps a view up to date the way chat.js does: by revision."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.communicator = communicator
        self.view: dict[str, Any] | None = None
        self.messages: list[dict[str, Any]] = []
        self.terminal: dict[str, Any] | None = None
        self.gaps = 0

    async def receive(self, timeout: float = 20) -> dict[str, Any]:
        message = decode(await self.communicator.receive_from(timeout=timeout))
        self.messages.append(message)
        kind = message["type"]
        if kind == "snapshot":
            self.view = message["view"]
        elif kind == "patch":
            assert self.view is not None, "a patch before any snapshot"
            if message["revision"] <= self.view["revision"]:
                pass  # stale: already have it
            elif not apply_patch(self.view, message):
                self.gaps += 1
                await self.communicator.send_to(text_data='{"type":"snapshot"}')
        elif kind == "terminal":
            self.terminal = message
        return message

    async def until_terminal(self, timeout: float = 30) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while self.terminal is None:
                await self.receive(timeout)
            # The rule every client follows (chat.js, bench/viewers.py): a terminal newer than the
            # view means a patch was lost on the way, or a snapshot asked for a gap is still in
            # flight (a takeover's revision jump): the committed final view, from a snapshot.
            if self.view is None or self.view["revision"] < self.terminal["revision"]:
                await self.communicator.send_to(text_data='{"type":"snapshot"}')
                while self.view is None or self.view["revision"] < self.terminal["revision"]:
                    await self.receive(timeout)
        assert self.terminal is not None
        return self.terminal

    def text(self) -> str:
        assert self.view is not None
        return "".join(b["text"] for b in self.view["blocks"] if b["kind"] == "text")

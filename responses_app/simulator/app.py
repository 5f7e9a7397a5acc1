"""The simulator's ASGI application: routing and the Responses API endpoints.

Pure ASGI, no Django: it is mounted under /simulator/v1 by project.asgi and served on its own by
`python -m responses_app.simulator`. With an `api_key` every request must bear it (401 otherwise);
without one (in-process tests and fixtures only) it answers anyone. A `websocket` scope on
`/v1/responses` is WebSocket mode (wsmode.py), on the same store.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any
from urllib.parse import parse_qs

import orjson

from . import wsmode
from .api_errors import ApiError, bad_request, not_found
from .asgi_io import ClientConnection, Receive, Scope, Send, parse_json, read_body, send_error, send_json, stream_log
from .auth import check_authorization
from .creation import start_response
from .faults import FAULTS
from .moderations_endpoint import moderate
from .scenarios import SCENARIOS
from .store import TERMINAL, SimResponse, Store

_MODELS_CREATED = 1_750_000_000


def models_payload() -> dict[str, Any]:
    faults = "; ".join(f"{key}: {desc}" for key, (_, desc) in FAULTS.items())
    return {
        "object": "list",
        "data": [
            {
                "id": s.name,
                "object": "model",
                "created": _MODELS_CREATED,
                "owned_by": "simulator",
                "description": f"{s.description} Default pace {s.tokens_per_s:g} tokens/s. "
                f"Faults via metadata (string values): {faults}",
            }
            for s in SCENARIOS.values()
        ],
    }


class SimulatorApp:
    def __init__(self, store: Store | None = None, *, api_key: str | None = None,
                 ws_max_age_s: float = wsmode.WS_MAX_AGE_S, stateless: bool = False) -> None:
        self.store = store if store is not None else Store()
        # As a server that keeps no responses (Ollama, llama.cpp's): no retrieve, cancel or delete.
        self.stateless = stateless
        self.api_key = api_key
        self.ws_max_age_s = ws_max_age_s  # WebSocket mode's connection limit
        self._models = orjson.dumps(models_payload())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                kind = message["type"].rsplit(".", 1)[-1]
                await send({"type": f"lifespan.{kind}.complete"})
                if kind == "shutdown":
                    return
        if scope["type"] not in ("http", "websocket"):
            return
        path: str = scope["path"]
        root = scope.get("root_path") or ""
        if root and path.startswith(root):
            path = path[len(root) :]
        if path == "/v1" or path.startswith("/v1/"):
            path = path[3:]
        parts = [p for p in path.split("/") if p]
        if scope["type"] == "websocket":
            await wsmode.serve(scope, receive, send, store=self.store, api_key=self.api_key, path=parts,
                               max_age_s=self.ws_max_age_s)
            return
        method = scope["method"]
        try:
            if self.api_key is not None:
                check_authorization(scope, self.api_key)
            await self._route(method, parts, scope, receive, send)
        except ApiError as error:
            await send_error(send, error)
        except ConnectionResetError:
            return

    async def _route(
        self, method: str, parts: list[str], scope: Scope, receive: Receive, send: Send
    ) -> None:
        if parts == ["models"] and method == "GET":
            await send_json(send, 200, self._models)
        elif len(parts) == 2 and parts[0] == "models" and method == "GET":
            model = next((m for m in models_payload()["data"] if m["id"] == parts[1]), None)
            if model is None:
                raise not_found(
                    f"The model '{parts[1]}' does not exist", param="model", code="model_not_found"
                )
            await send_json(send, 200, orjson.dumps(model))
        elif parts == ["responses"] and method == "POST":
            await self.create(receive, send)
        elif self.stateless and len(parts) >= 2 and parts[0] == "responses":
            raise ApiError(404, f"Invalid URL ({method} /v1/{'/'.join(parts)})", code="unknown_url")
        elif parts == ["moderations"] and method == "POST":
            body = await read_body(receive)
            moderation_id = "modr-" + hashlib.blake2b(body, digest_size=12).hexdigest()
            await send_json(send, 200, orjson.dumps(await moderate(parse_json(body), moderation_id)))
        elif len(parts) == 2 and parts[0] == "responses" and method == "GET":
            await self.retrieve(parts[1], scope, receive, send)
        elif len(parts) == 2 and parts[0] == "responses" and method == "DELETE":
            resp = self._get(parts[1])
            resp.cancel()
            self.store.discard(resp.id)
            await send_json(
                send, 200, orjson.dumps({"id": resp.id, "object": "response", "deleted": True})
            )
        elif (
            len(parts) == 3
            and parts[0] == "responses"
            and parts[2] == "cancel"
            and method == "POST"
        ):
            await self.cancel(parts[1], send)
        else:
            raise ApiError(404, f"Invalid URL ({method} /v1/{'/'.join(parts)})", code="unknown_url")

    def _get(self, response_id: str) -> SimResponse:
        resp = self.store.get(response_id)
        if resp is None:
            raise not_found(f"Response with id '{response_id}' not found.")
        return resp

    # --- POST /responses ----------------------------------------------------------------------
    async def create(self, receive: Receive, send: Send) -> None:
        request = parse_json(await read_body(receive))
        if self.stateless and request.get("previous_response_id"):  # it keeps nothing to chain to
            raise not_found(f"Previous response with id '{request['previous_response_id']}' not found.",
                            param="previous_response_id", code="previous_response_not_found")
        resp = await start_response(self.store, request)
        ephemeral = not resp.background and request.get("store") is False
        try:
            if request.get("stream"):
                await self._serve_stream(resp, receive, send, after=-1, owner=True)
            elif resp.background:
                await send_json(send, 200, orjson.dumps(resp.obj))
            else:
                await self._serve_final(resp, receive, send)
        finally:
            if ephemeral and resp.finished:
                self.store.discard(resp.id)

    async def _serve_stream(
        self, resp: SimResponse, receive: Receive, send: Send, *, after: int, owner: bool
    ) -> None:
        conn = ClientConnection(receive)
        try:
            complete = await stream_log(send, conn, resp, resp.position_after(after), after=after)
        finally:
            conn.close()
        if owner and not complete and not resp.background:
            resp.cancel()  # a foreground response dies with its connection

    async def _serve_final(self, resp: SimResponse, receive: Receive, send: Send) -> None:
        conn = ClientConnection(receive)
        try:
            while not resp.finished:
                resp.consumed(resp.end)  # nobody reads this log
                fut = resp.waiter()
                conn.current = fut
                await fut
                if conn.gone:
                    resp.cancel()
                    return
        finally:
            conn.close()
        resp.consumed(resp.end)
        await send_json(send, 200, orjson.dumps(resp.obj))

    # --- GET /responses/{id} ------------------------------------------------------------------
    async def retrieve(self, response_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        resp = self._get(response_id)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        stream = query.get("stream", ["false"])[-1].lower() == "true"
        if not stream:
            await send_json(send, 200, orjson.dumps(resp.obj))
            return
        raw_after = query.get("starting_after", ["-1"])[-1]
        try:
            after = int(raw_after)
        except ValueError:
            raise bad_request(
                f"Invalid 'starting_after': expected an integer, got {raw_after!r}.",
                param="starting_after",
                code="invalid_value",
            ) from None
        if not resp.background:
            raise bad_request(
                "Streaming a stored response is only supported for responses created with "
                "background=true.",
                param="stream",
            )
        max_age = resp.faults.resume_max_age_s
        if max_age is not None and time.monotonic() - resp.created > max_age:
            raise bad_request(
                f"This response can no longer be streamed because it is more than "
                f"{max_age:g} seconds old.",
                param="stream",
            )
        await self._serve_stream(resp, receive, send, after=after, owner=False)

    # --- POST /responses/{id}/cancel ------------------------------------------------------------
    async def cancel(self, response_id: str, send: Send) -> None:
        resp = self._get(response_id)
        if not resp.background:
            raise bad_request("Only responses created with background=true can be cancelled.")
        if resp.status in TERMINAL and resp.status != "cancelled":
            raise bad_request(f"Cannot cancel a response with status '{resp.status}'.")
        task = resp.task
        resp.cancel()
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        await send_json(send, 200, orjson.dumps(resp.obj))


def create_app(store: Store | None = None, *, api_key: str | None = None,
               ws_max_age_s: float = wsmode.WS_MAX_AGE_S, stateless: bool = False) -> SimulatorApp:
    return SimulatorApp(store, api_key=api_key, ws_max_age_s=ws_max_age_s, stateless=stateless)

"""The simulator's ASGI application: routing and the Responses API endpoints.

Pure ASGI, no Django: it is mounted under /simulator/v1 by project.asgi and served on its own by
`python -m responses_app.simulator`. With an `api_key` every request must bear it (401 otherwise);
without one (in-process tests and fixtures only) it answers anyone.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from typing import Any
from urllib.parse import parse_qs

import orjson

from . import texts
from .auth import check_authorization
from .emitter import Emitter
from .errors import ApiError, bad_request, http_fault, not_found
from .faults import FAULTS, parse_faults, validate_metadata
from .moderation import moderate
from .objects import base_response
from .runner import Clock, generate
from .scenarios import FOLLOWUP, SCENARIOS, Context, ToolResult
from .store import TERMINAL, SimResponse, Store
from .wire import (
    Connection,
    Receive,
    Scope,
    Send,
    parse_json,
    read_body,
    send_error,
    send_json,
    stream_log,
)

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


def _seed_for(seed: int | None, request: dict[str, Any]) -> tuple[int, bool]:
    if seed is None:
        return random.getrandbits(64), False
    material = orjson.dumps(
        [
            seed,
            request.get("model"),
            request.get("input"),
            request.get("instructions"),
            request.get("previous_response_id"),
        ],
        option=orjson.OPT_SORT_KEYS,
    )
    return int.from_bytes(hashlib.blake2b(material, digest_size=8).digest(), "big"), True


class SimulatorApp:
    def __init__(self, store: Store | None = None, *, api_key: str | None = None) -> None:
        self.store = store or Store()
        self.api_key = api_key
        self._models = orjson.dumps(models_payload())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                kind = message["type"].rsplit(".", 1)[-1]
                await send({"type": f"lifespan.{kind}.complete"})
                if kind == "shutdown":
                    return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        root = scope.get("root_path") or ""
        if root and path.startswith(root):
            path = path[len(root) :]
        if path == "/v1" or path.startswith("/v1/"):
            path = path[3:]
        parts = [p for p in path.split("/") if p]
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
        metadata = validate_metadata(request.get("metadata"))
        faults = parse_faults(metadata)
        model = request.get("model")
        if not isinstance(model, str) or not model:
            raise bad_request(
                "Missing required parameter: 'model'.",
                param="model",
                code="missing_required_parameter",
            )
        if faults.first_byte_delay_ms:
            await asyncio.sleep(faults.first_byte_delay_ms / 1000)
        if faults.http_error:
            raise http_fault(faults.http_error, model)
        scenario = SCENARIOS.get(model)
        if scenario is None:
            raise ApiError(
                400,
                f"The requested model '{model}' does not exist. The simulator serves: "
                f"{', '.join(SCENARIOS)}.",
                param="model",
                code="model_not_found",
            )
        prev_id = request.get("previous_response_id")
        prev = None
        if prev_id is not None:
            prev = self.store.get(prev_id) if isinstance(prev_id, str) else None
            if prev is None:
                raise not_found(
                    f"Previous response with id '{prev_id}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
        tool_results = self._tool_results(request.get("input"), prev)
        background = bool(request.get("background"))
        seed, virtual = _seed_for(faults.seed, request)
        rng = random.Random(seed)
        stream_options = request.get("stream_options") or {}
        include = request.get("include") or []
        top = request.get("top_logprobs")
        emitter = Emitter(
            rng,
            obfuscation=stream_options.get("include_obfuscation", True) is not False,
            top_logprobs=(top if isinstance(top, int) else 0)
            if "message.output_text.logprobs" in include
            else None,
        )
        response_id = emitter.new_id("resp")
        created_at = 1_760_000_000 + rng.randrange(10_000_000) if virtual else int(time.time())
        obj = base_response(
            request,
            response_id=response_id,
            model=model,
            created_at=created_at,
            background=background,
            reasoning_model=scenario.reasoning,
            metadata=metadata,
        )
        prompt = texts.prompt_text(request.get("input"))
        ctx = Context(
            request, rng, emitter, prompt, tokens=faults.tokens, tool_results=tool_results,
            approvals=self._approvals(request.get("input"), prev),
        )
        plan = (FOLLOWUP if tool_results else scenario).plan(ctx)
        tokens_per_s = (
            faults.tokens_per_s if faults.tokens_per_s is not None else scenario.tokens_per_s
        )
        resp = SimResponse(
            response_id,
            obj,
            background=background,
            faults=faults,
            prev_id=prev.id if prev else None,
        )
        self.store.add(resp)
        resp.start(
            asyncio.ensure_future(
                generate(
                    resp,
                    plan,
                    ctx,
                    emitter,
                    tokens_per_s=tokens_per_s,
                    clock=Clock(created_at, virtual, tokens_per_s),
                    input_tokens=len(texts.tokenize(prompt)) + 8,
                )
            )
        )
        ephemeral = not background and request.get("store") is False
        try:
            if request.get("stream"):
                await self._serve_stream(resp, receive, send, after=-1, owner=True)
            elif background:
                await send_json(send, 200, orjson.dumps(obj))
            else:
                await self._serve_final(resp, receive, send)
        finally:
            if ephemeral and resp.finished:
                self.store.discard(resp.id)

    def _approvals(self, items: Any, prev: SimResponse | None) -> dict[str, bool]:
        """mcp_approval_response items, each for an approval request the previous response made."""
        responses = [i for i in items if isinstance(i, dict) and i.get("type") == "mcp_approval_response"] \
            if isinstance(items, list) else []
        if not responses:
            return {}
        asked = {o.get("id") for o in (prev.obj.get("output") or []) if isinstance(o, dict)
                 and o.get("type") == "mcp_approval_request"} if prev is not None else set()
        decided: dict[str, bool] = {}
        for item in responses:
            approval_id = item.get("approval_request_id")
            if approval_id not in asked:
                raise bad_request(f"No approval request found with id {approval_id}.", param="input")
            if not isinstance(item.get("approve"), bool):
                raise bad_request("'approve' must be a boolean.", param="input")
            decided[str(approval_id)] = item["approve"]
        return decided

    def _tool_results(self, items: Any, prev: SimResponse | None) -> list[ToolResult]:
        if not isinstance(items, list):
            return []
        outputs = [
            i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        if not outputs:
            return []
        known: dict[str, tuple[str, str]] = {}
        for item in items:
            if (
                isinstance(item, dict)
                and item.get("type") == "function_call"
                and item.get("call_id")
            ):
                known[str(item["call_id"])] = (
                    str(item.get("name", "")),
                    str(item.get("arguments", "")),
                )
        seen: set[str] = set()
        while prev is not None and prev.id not in seen:
            seen.add(prev.id)
            for call_id, call in prev.calls.items():
                known.setdefault(call_id, call)
            prev = self.store.get(prev.prev_id) if prev.prev_id else None
        results = []
        for out in outputs:
            call_id = out.get("call_id")  # type: ignore[assignment]
            if not isinstance(call_id, str) or call_id not in known:
                raise bad_request(
                    f"No tool call found for function call output with call_id {call_id}.",
                    param="input",
                )
            output = out.get("output")
            if not isinstance(output, str):
                output = orjson.dumps(output).decode()
            name, arguments = known[call_id]
            results.append(ToolResult(call_id, name, arguments, output))
        return results

    async def _serve_stream(
        self, resp: SimResponse, receive: Receive, send: Send, *, after: int, owner: bool
    ) -> None:
        conn = Connection(receive)
        try:
            complete = await stream_log(send, conn, resp, resp.position_after(after), after=after)
        finally:
            conn.close()
        if owner and not complete and not resp.background:
            resp.cancel()  # a foreground response dies with its connection

    async def _serve_final(self, resp: SimResponse, receive: Receive, send: Send) -> None:
        conn = Connection(receive)
        try:
            while not resp.finished:
                resp.consumed(resp.base + len(resp.entries))  # nobody reads this log
                fut = resp.waiter()
                conn.current = fut
                await fut
                if conn.gone:
                    resp.cancel()
                    return
        finally:
            conn.close()
        resp.consumed(resp.base + len(resp.entries))
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


def create_app(store: Store | None = None, *, api_key: str | None = None) -> SimulatorApp:
    return SimulatorApp(store, api_key=api_key)

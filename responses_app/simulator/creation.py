"""Starting a response from a create body: validation, faults before the stream, the chain of
previous responses and the generation task. Shared by `POST /responses` and WebSocket mode's
`response.create`; the caller serves the events.

Pure ASGI-free logic on the simulator's own objects: no server, no Django.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Callable
from typing import Any

import orjson

from . import texts
from .api_errors import ApiError, bad_request, http_fault, not_found
from .dialects import response_id as dialect_response_id
from .emitter import Emitter
from .faults import Faults, parse_faults, validate_metadata
from .generation import Clock, generate
from .response_object import base_response
from .scenarios import CONTINUATION, FOLLOWUP, SCENARIOS, Context, ToolResult
from .store import SimResponse, Store

Lookup = Callable[[str], SimResponse | None]


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


def request_faults(request: dict[str, Any]) -> tuple[dict[str, str], Faults]:
    metadata = validate_metadata(request.get("metadata"))
    return metadata, parse_faults(metadata)


async def start_response(
    store: Store, request: dict[str, Any], *, lookup: Lookup | None = None, background_allowed: bool = True
) -> SimResponse:
    """Validate `request`, apply the faults that come before any stream (delay, HTTP error) and
    start generating. `lookup` finds a previous response (default: the store); raises ApiError."""
    find = lookup or store.get
    metadata, faults = request_faults(request)
    model = request.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request(
            "Missing required parameter: 'model'.",
            param="model",
            code="missing_required_parameter",
        )
    background = bool(request.get("background"))
    if background and not background_allowed:
        raise bad_request("Background mode is not supported in WebSocket mode.", param="background")
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
        prev = find(prev_id) if isinstance(prev_id, str) else None
        if prev is None:
            raise not_found(
                f"Previous response with id '{prev_id}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
    tool_results = _tool_results(request.get("input"), prev, find)
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
        id_length=faults.id_length,
    )
    emitter.delta_chars = faults.delta_chars
    response_id = dialect_response_id(faults.dialect, emitter.new_id("resp"))  # sim.dialect's ids
    while (same := store.get(response_id)) is not None and not same.finished:
        # The same seed and request while the first is still running: two clients must not share
        # (and cancel) one response, as no real upstream would make them. A finished one is replaced.
        response_id = dialect_response_id(faults.dialect, emitter.unseeded_id("resp"))
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
        approvals=_approvals(request.get("input"), prev),
    )
    # "Continue" after an answer (in the input, or the previous response's): the rest of that answer.
    ctx.said = _said_before(request.get("input"), prev) if texts.asks_to_continue(prompt) else ""
    plan = (FOLLOWUP if tool_results else CONTINUATION if ctx.said else scenario).plan(ctx)
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
    store.add(resp)
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
    return resp


def _said_before(items: Any, prev: SimResponse | None) -> str:
    """The answer before the user's last words: the last assistant message of the input, else the
    text of the previous response's messages."""
    for item in reversed(items) if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("role") == "assistant":
            content = item.get("content")
            return content if isinstance(content, str) else texts.prompt_text([item])
    output = prev.obj.get("output") or [] if prev is not None else []
    return "".join(str(part.get("text") or "") for item in output if isinstance(item, dict)
                   and item.get("type") == "message" for part in item.get("content") or []
                   if isinstance(part, dict) and part.get("type") == "output_text")


def _approvals(items: Any, prev: SimResponse | None) -> dict[str, bool]:
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


def _tool_results(items: Any, prev: SimResponse | None, find: Lookup) -> list[ToolResult]:
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
        prev = find(prev.prev_id) if prev.prev_id else None
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

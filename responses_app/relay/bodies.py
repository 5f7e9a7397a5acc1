"""Request bodies for `POST /v1/responses` (and WebSocket mode's `response.create`), from a stored
logical request.

Every body carries the output cap (RELAY_MAX_OUTPUT_TOKENS) and asks the provider not to pad
streamed deltas (`stream_options.include_obfuscation: false`): between two servers the padding is
only bytes. RELAY_UPSTREAM_NO_OBFUSCATION=false leaves
`stream_options` out, for a provider that refuses it; the event log drops the padding either way.
"""

from __future__ import annotations

from typing import Any

from ..conf import app_settings
from ..models import ResponseRequest
from ..providers import Supports
from ..selectors import RunRequest

_FORWARDED = ("background", "metadata", "previous_response_id", "instructions", "temperature", "reasoning",
              "tools")


def build_body(request: ResponseRequest | RunRequest) -> dict[str, Any]:
    params = request.params or {}
    # What the provider that serves the request can do (providers.py): one that keeps no responses
    # gets `store: false` and no chain, one without background mode no `background`.
    provider = app_settings.provider(getattr(request, "provider", ""))
    supports = provider.supports if provider is not None else Supports()
    body: dict[str, Any] = {"model": request.model, "input": request.input, "store": supports.store}
    if app_settings.UPSTREAM_NO_OBFUSCATION:
        body["stream_options"] = {"include_obfuscation": False}
    for key in _FORWARDED:
        if params.get(key) not in (None, "", {}, []):
            body[key] = params[key]
    if not supports.background:
        body.pop("background", None)
    if not supports.store:
        body.pop("previous_response_id", None)
    # The output cap on every body, continuations and full-context retries included, whatever
    # path made the request (a provider always gets one; the simulator only when one was asked).
    cap, asked = app_settings.MAX_OUTPUT_TOKENS, params.get("max_output_tokens")
    simulated = provider.simulator if provider is not None else app_settings.upstream_is_simulator
    if asked or not simulated:
        body["max_output_tokens"] = min(int(asked or cap), cap)
    return body


def continuation_body(request: ResponseRequest | RunRequest, previous_response_id: str,
                      outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """The next round after tool results: the outputs as input, chained to the last response."""
    body = build_body(request)
    body["previous_response_id"] = previous_response_id
    body["input"] = outputs
    return body


def full_context_body(request: ResponseRequest | RunRequest, context: list[dict[str, Any]]) -> dict[str, Any]:
    """The same request without the chain: the conversation so far (`selectors.conversation_context`)
    and this turn's input, with `previous_response_id: null`."""
    body = build_body(request)
    own = request.input if isinstance(request.input, list) else [{"role": "user", "content": request.input}]
    body["input"] = [*context, *own]
    body["previous_response_id"] = None
    return body


def stores(request: ResponseRequest | RunRequest) -> bool:
    """The provider serving the request keeps responses (a continuation may chain to one)."""
    provider = app_settings.provider(getattr(request, "provider", ""))
    return provider is None or provider.supports.store


def stateless_continuation_body(request: ResponseRequest | RunRequest, context: list[dict[str, Any]],
                                rounds: list[dict[str, Any]], calls: list[dict[str, Any]],
                                outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """The next round for a provider that keeps no responses (nothing to chain to): the
    conversation, this turn's input, and every function call of this turn with its output
    (`rounds`, the runner's, grows by this round's)."""
    rounds += [{"type": "function_call", "call_id": call["call_id"], "name": call.get("name", ""),
                "arguments": call.get("arguments") or ""} for call in calls]
    rounds += outputs
    body = full_context_body(request, context)
    body["input"] = [*body["input"], *rounds]
    return body

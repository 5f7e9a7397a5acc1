"""The Response object, shaped like the real API's (field set and order taken from captures)."""

from __future__ import annotations

from typing import Any

_ECHOED_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("instructions", None),
    ("max_output_tokens", None),
    ("max_tool_calls", None),
)


def base_response(
    request: dict[str, Any],
    *,
    response_id: str,
    model: str,
    created_at: int,
    background: bool,
    reasoning_model: bool,
    metadata: dict[str, str],
) -> dict[str, Any]:
    """A Response, `queued`/`in_progress` with no output yet; mutated as generation proceeds."""
    obj: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": "queued" if background else "in_progress",
        "background": background,
        "completed_at": None,
        "error": None,
        "incomplete_details": None,
    }
    for key, default in _ECHOED_DEFAULTS:
        obj[key] = request.get(key, default)
    reasoning = request.get("reasoning")
    if not isinstance(reasoning, dict):
        reasoning = (
            {"effort": "medium", "summary": "auto"}
            if reasoning_model
            else {"effort": None, "summary": None}
        )
    text = request.get("text") if isinstance(request.get("text"), dict) else None
    obj.update(
        {
            "model": model,
            "output": [],
            "parallel_tool_calls": request.get("parallel_tool_calls", True),
            "previous_response_id": request.get("previous_response_id"),
            "prompt_cache_key": request.get("prompt_cache_key"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "safety_identifier": request.get("safety_identifier"),
            "service_tier": request.get("service_tier", "auto"),
            "store": request.get("store", True),
            "temperature": float(request.get("temperature", 1.0)),
            "text": text or {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": request.get("tool_choice", "auto"),
            "tools": request.get("tools") or [],
            "top_logprobs": request.get("top_logprobs", 0),
            "top_p": float(request.get("top_p", 1.0)),
            "truncation": request.get("truncation", "disabled"),
            "usage": None,
            "user": request.get("user"),
            "metadata": metadata,
        }
    )
    return obj


def usage(input_tokens: int, output_tokens: int, reasoning_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": input_tokens + output_tokens,
    }

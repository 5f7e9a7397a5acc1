"""The Response object, shaped like the real API's (field set and order taken from captures)."""

from __future__ import annotations

from typing import Any

from .api_errors import bad_request

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
        "frequency_penalty": _number(request, "frequency_penalty", 0.0),
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
            "presence_penalty": _number(request, "presence_penalty", 0.0),
            "previous_response_id": request.get("previous_response_id"),
            "prompt_cache_key": request.get("prompt_cache_key"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "safety_identifier": request.get("safety_identifier"),
            "service_tier": request.get("service_tier", "auto"),
            "store": request.get("store", True),
            "temperature": _number(request, "temperature", 1.0),
            "text": text or {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": request.get("tool_choice", "auto"),
            "tools": [echoed_tool(tool) for tool in request.get("tools") or []],
            "top_logprobs": request.get("top_logprobs", 0),
            "top_p": _number(request, "top_p", 1.0),
            "truncation": request.get("truncation", "disabled"),
            "usage": None,
            "user": request.get("user"),
            "metadata": metadata,
        }
    )
    return obj


def _number(request: dict[str, Any], key: str, default: float) -> float:
    value = request.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_request(
            f"Invalid type for '{key}': expected a number, but got {type(value).__name__}.",
            param=key,
            code="invalid_type",
        )
    return float(value)


def echoed_tool(tool: Any) -> Any:
    """A request's tool as the Response echoes it: a function tool with every field the
    specification requires (`description` and `parameters` null when not given, `strict` true by
    default, as the API applies it); other tools as sent."""
    if not isinstance(tool, dict) or tool.get("type") != "function":
        return tool
    strict = tool.get("strict")
    return {
        **tool,
        "type": "function",
        "description": tool.get("description"),
        "name": tool.get("name"),
        "parameters": tool.get("parameters"),
        "strict": strict if isinstance(strict, bool) else True,
    }


def usage(input_tokens: int, output_tokens: int, reasoning_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": input_tokens + output_tokens,
    }

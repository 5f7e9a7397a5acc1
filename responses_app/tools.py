"""Function tools the relay runs on the server for the model, once per call id.

Arguments are parsed only when complete (from the finished call item, never from deltas) and
validated before anything runs. The ToolCall row's unique call id is the guarantee that a tool
runs once: a replayed, resumed or reconnected stream finds the claim and does not run it again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson


class ToolError(Exception):
    """Bad arguments or a failing tool: the message goes back to the model as the output."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any]], dict[str, Any]]

    def definition(self) -> dict[str, Any]:
        return {"type": "function", "name": self.name, "description": self.description,
                "parameters": self.parameters, "strict": True}


def _weather(args: dict[str, Any]) -> dict[str, Any]:
    # A deterministic stand-in: the same city always gets the same weather.
    location = args["location"]
    digest = hashlib.sha256(location.lower().encode()).digest()
    celsius = digest[0] % 35 - 5
    unit = args.get("unit") or "C"
    temperature = celsius if unit == "C" else round(celsius * 9 / 5 + 32)
    conditions = ["sunny", "cloudy", "rainy", "windy", "foggy"][digest[1] % 5]
    return {"location": location, "temperature": temperature, "unit": unit, "conditions": conditions}


def _time(args: dict[str, Any]) -> dict[str, Any]:
    offset = int(args.get("utc_offset_hours") or 0)
    if not -12 <= offset <= 14:
        raise ToolError("utc_offset_hours must be between -12 and 14")
    now = dt.datetime.now(dt.timezone(dt.timedelta(hours=offset)))
    return {"time": now.strftime("%H:%M"), "utc_offset_hours": offset}


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "get_weather", "Current weather for a city.",
            {"type": "object", "additionalProperties": False, "required": ["location", "unit"],
             "properties": {"location": {"type": "string", "description": "City name"},
                            "unit": {"type": "string", "enum": ["C", "F"]}}},
            _weather,
        ),
        Tool(
            "get_time", "The current time at a UTC offset.",
            {"type": "object", "additionalProperties": False, "required": ["utc_offset_hours"],
             "properties": {"utc_offset_hours": {"type": "integer"}}},
            _time,
        ),
    )
}


def tool_definitions() -> list[dict[str, Any]]:
    return [tool.definition() for tool in TOOLS.values()]


def parse_arguments(name: str, arguments: str) -> dict[str, Any]:
    """Parse complete arguments and check them against the tool's required fields."""
    tool = TOOLS.get(name)
    if tool is None:
        raise ToolError(f"unknown tool {name!r}")
    try:
        args = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON: {exc}") from exc
    if not isinstance(args, dict):
        raise ToolError("arguments must be a JSON object")
    missing = [k for k in tool.parameters.get("required", []) if k not in args]
    if missing:
        raise ToolError(f"missing arguments: {', '.join(missing)}")
    return args  # type: ignore[no-any-return]


def run_tool(name: str, args: dict[str, Any]) -> str:
    try:
        return orjson.dumps(TOOLS[name].run(args)).decode()
    except ToolError:
        raise
    except Exception as exc:  # a tool's own failure is reported to the model, not raised
        raise ToolError(f"{name} failed: {exc}") from exc

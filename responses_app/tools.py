"""Function tools the relay runs on the server for the model, once per call id.

Arguments are parsed only when complete (from the finished call item, never from deltas) and
validated before anything runs. The ToolCall row's unique call id is the guarantee that a tool
runs once: a replayed, resumed or reconnected stream finds the claim and does not run it again.

A host registers its own with the decorator (the module must be imported: list it in
RELAY_TOOLS, or import it from an AppConfig.ready):

    from responses_app.api import tool

    @tool(description="Look an order up by its number.",
          parameters={"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]})
    def lookup_order(args: dict) -> dict:
        return {"status": "shipped"}

RELAY_TOOLS (dotted paths, imported when tools are offered) defaults to the two built-in tools the
simulator's scenarios call; a host that sets it offers exactly what it lists (plus any tool
registered with the decorator). The model is offered every registered tool unless a submit names
some (`api.submit(..., tools=[...])`).
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
    run: Callable[[dict[str, Any]], Any]
    strict: bool = True

    def definition(self) -> dict[str, Any]:
        return {"type": "function", "name": self.name, "description": self.description,
                "parameters": self.parameters, "strict": self.strict}

    def __call__(self, args: dict[str, Any]) -> Any:
        return self.run(args)


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


# The built-in tools (RELAY_TOOLS' default): deterministic stand-ins the simulator's scenarios call.
get_weather = Tool(
    "get_weather", "Current weather for a city.",
    {"type": "object", "additionalProperties": False, "required": ["location", "unit"],
     "properties": {"location": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["C", "F"]}}},
    _weather,
)
get_time = Tool(
    "get_time", "The current time at a UTC offset.",
    {"type": "object", "additionalProperties": False, "required": ["utc_offset_hours"],
     "properties": {"utc_offset_hours": {"type": "integer"}}},
    _time,
)

# Tools registered with the decorator, by name (RELAY_TOOLS' are found when asked: `offered`).
_REGISTERED: dict[str, Tool] = {}


def register(tool: Tool) -> Tool:
    """Offer `tool` to the model from now on (a name registered twice: the later one wins)."""
    _REGISTERED[tool.name] = tool
    return tool


def tool(name: str | None = None, *, description: str, parameters: dict[str, Any], strict: bool = True
         ) -> Callable[[Callable[[dict[str, Any]], Any]], Tool]:
    """Register a function as a tool: it takes the parsed arguments (a dict) and returns what
    is JSON-serialisable, or text (the output the model reads); ToolError or any exception
    becomes an error output, never a crash. `strict`: the API enforces the schema (every
    property required, no others: the Responses API's function calling)."""
    def decorate(function: Callable[[dict[str, Any]], Any]) -> Tool:
        return register(Tool(name or function.__name__, description, parameters, function, strict))
    return decorate


def offered() -> dict[str, Tool]:
    """Every tool offered to the model, by name: RELAY_TOOLS (imported; checks.py reports a bad
    path) and the decorated ones."""
    from django.utils.module_loading import import_string

    from .conf import app_settings

    found: dict[str, Tool] = {}
    for path in app_settings.TOOLS:
        try:
            candidate = import_string(path)
        except ImportError:
            continue  # responses_app.E006
        if isinstance(candidate, Tool):
            found[candidate.name] = candidate
    found.update(_REGISTERED)
    return found


def tool_definitions() -> list[dict[str, Any]]:
    return [tool.definition() for tool in offered().values()]


def parse_arguments(name: str, arguments: str) -> dict[str, Any]:
    """Parse complete arguments and check them against the tool's required fields."""
    tool = offered().get(name)
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
        result = offered()[name].run(args)
        return result if isinstance(result, str) else orjson.dumps(result).decode()
    except ToolError:
        raise
    except Exception as exc:  # a tool's own failure is reported to the model, not raised
        raise ToolError(f"{name} failed: {exc}") from exc

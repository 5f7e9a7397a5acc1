"""The chaos run's tools: the built-in ones, each run also appended to a file (CHAOS_TOOL_LOG) with
the request it ran for, so the run can count how often each call really ran, apart from what the
relay's ToolCall rows say. The line is written before the tool returns, so a run that the relay
never recorded (a kill -9 between the two) is still counted."""

from __future__ import annotations

import os
from typing import Any

import orjson

from responses_app import tools as builtin
from responses_app.ops import logcontext


def _counted(tool: builtin.Tool) -> builtin.Tool:
    def run(args: dict[str, Any]) -> Any:
        path = os.environ.get("CHAOS_TOOL_LOG")
        if path:
            request_id, response_id = logcontext.current()
            line = orjson.dumps({"request": request_id, "response": response_id, "name": tool.name,
                                 "args": args, "pid": os.getpid()}) + b"\n"
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)  # one write of a short line to an O_APPEND file: never interleaved
            finally:
                os.close(fd)
        return tool.run(args)

    return builtin.Tool(tool.name, tool.description, tool.parameters, run, tool.strict)


get_weather = _counted(builtin.get_weather)
get_time = _counted(builtin.get_time)
PATHS = "bench.chaos.tools.get_weather,bench.chaos.tools.get_time"

"""Scenarios, chosen by model name: what the simulated model outputs, as a plan of events."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from . import texts
from .emitter import Emission, Emitter


@dataclass(slots=True)
class ToolResult:
    call_id: str
    name: str
    arguments: str
    output: str


@dataclass(slots=True)
class Context:
    """Everything a plan may read, and the outcome it leaves for the terminal event."""

    request: dict[str, Any]
    rng: random.Random
    emitter: Emitter
    prompt: str
    tokens: int | None = None
    tool_results: list[ToolResult] = field(default_factory=list)
    approvals: dict[str, bool] = field(default_factory=dict)  # mcp_approval_response items in the input
    status: str = "completed"
    error: dict[str, Any] | None = None
    incomplete_details: dict[str, Any] | None = None
    said: str = ""  # a continuation: the answer asked to go on (texts.asks_to_continue)

    def function_tools(self) -> list[dict[str, Any]]:
        tools = self.request.get("tools") or []
        return [
            t
            for t in tools
            if isinstance(t, dict) and t.get("type") == "function" and t.get("name")
        ]


Plan = Callable[[Context], Iterator[Emission]]


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    plan: Plan
    tokens_per_s: float = 40.0
    reasoning: bool = False


def _opening(ctx: Context) -> str:
    seen = "".join(f"{note}\n\n" for note in texts.attachment_notes(ctx.request.get("input")))
    prompt = " ".join(ctx.prompt.split())
    if not prompt:
        return seen
    if len(prompt) > 80:
        prompt = prompt[:77] + "..."
    return f"You asked: “{prompt}”\n\n{seen}"


def plain_text(ctx: Context) -> Iterator[Emission]:
    if ctx.tokens:
        text = texts.truncate_tokens(texts.long_text(ctx.rng, ctx.tokens), ctx.tokens)
    else:
        text = _opening(ctx) + "\n\n".join(texts.paragraphs(ctx.rng, ctx.rng.randint(2, 4)))
    yield from _capped(ctx, _heeding(ctx) + text)


def _heeding(ctx: Context) -> str:
    """The request's instructions, said back (a simulator cannot follow them: it shows it got them)."""
    instructions = ctx.request.get("instructions")
    if not isinstance(instructions, str) or not instructions.strip():
        return ""
    words = " ".join(instructions.split())
    return f"Instructions received: “{words if len(words) <= 80 else words[:77] + '...'}”\n\n"


def _capped(ctx: Context, text: str) -> Iterator[Emission]:
    """The message, cut short (incomplete) at the request's max_output_tokens when it is longer."""
    limit = ctx.request.get("max_output_tokens")
    if isinstance(limit, int) and 0 < limit < len(texts.tokenize(text)):
        yield from ctx.emitter.message(texts.truncate_tokens(text, limit), status="incomplete")
        ctx.status = "incomplete"
        ctx.incomplete_details = {"reason": "max_output_tokens"}
        return
    yield from ctx.emitter.message(text)


def rich_text(ctx: Context) -> Iterator[Emission]:
    yield from ctx.emitter.message(texts.RICH_ANSWER)


def long_text(ctx: Context) -> Iterator[Emission]:
    tokens = ctx.tokens or 3000
    yield from ctx.emitter.message(texts.truncate_tokens(texts.long_text(ctx.rng, tokens), tokens))


_SOURCES = (
    (
        "Server-sent events — HTML Living Standard",
        "https://html.spec.whatwg.org/multipage/server-sent-events.html",
    ),
    (
        "Streaming API responses — OpenAI",
        "https://platform.openai.com/docs/guides/streaming-responses",
    ),
    ("Background mode — OpenAI", "https://platform.openai.com/docs/guides/background"),
)


def citations(ctx: Context) -> Iterator[Emission]:
    query = ctx.prompt[:60] or "server-sent events resume"
    yield from ctx.emitter.web_search(query)
    sentences = (
        "Server-sent events carry one JSON object per `data:` line, separated by blank lines.",
        "The Responses API numbers every event with a `sequence_number`, so a client can resume.",
        "Background responses keep running on the server and can be streamed again later.",
    )
    text = ""
    annotations: list[tuple[int, dict[str, Any]]] = []
    for sentence, (title, url) in zip(sentences, _SOURCES, strict=True):
        start = len(text)
        text += sentence
        host = url.split("/")[2]
        cite = f" ([{host}]({url}?utm_source=openai))"
        text += cite
        annotation = {
            "type": "url_citation",
            "end_index": len(text),
            "start_index": start + len(sentence) + 1,
            "title": title,
            "url": f"{url}?utm_source=openai",
        }
        annotations.append((len(text), annotation))
        text += " "
    yield from ctx.emitter.message(text.rstrip(), annotations=tuple(annotations))


def _value_for(name: str, schema: dict[str, Any], variant: int) -> Any:
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return 3 + variant
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    cities = ("Paris, France", "Tokyo, Japan", "São Paulo, Brazil", "Zürich, Switzerland")
    if any(word in name.lower() for word in ("location", "city", "place", "where")):
        return cities[variant % len(cities)]
    return f"example {name} {variant + 1}"


def _arguments(tool: dict[str, Any] | None, variant: int) -> tuple[str, str]:
    if tool is None:
        cities = ("Paris, France", "Tokyo, Japan")
        return "get_weather", orjson.dumps({"location": cities[variant % 2], "unit": "C"}).decode()
    params = tool.get("parameters") or {}
    props = params.get("properties") or {}
    required = params.get("required") or list(props)
    args = {key: _value_for(key, props.get(key) or {}, variant) for key in props if key in required}
    return str(tool["name"]), orjson.dumps(args).decode()


def function_calls(count: int) -> Plan:
    def plan(ctx: Context) -> Iterator[Emission]:
        tools = ctx.function_tools()
        calls = count if ctx.request.get("parallel_tool_calls", True) else 1
        for variant in range(calls):
            tool = tools[variant % len(tools)] if tools else None
            name, arguments = _arguments(tool, variant)
            yield from ctx.emitter.function_call(name, arguments, ctx.emitter.call_id())

    return plan


def tool_followup(ctx: Context) -> Iterator[Emission]:
    lines = ["Here is what the tools returned:\n"]
    for result in ctx.tool_results:
        lines.append(f"- `{result.name}` ({result.call_id}) → {result.output}")
    lines.append("\nBased on that result, the answer is: " + ctx.tool_results[-1].output)
    yield from ctx.emitter.message("\n".join(lines))


def reasoning(ctx: Context) -> Iterator[Emission]:
    yield from ctx.emitter.reasoning(list(texts.SUMMARY_PARTS[: ctx.rng.randint(2, 3)]))
    yield from ctx.emitter.message(_opening(ctx) + "\n\n".join(texts.paragraphs(ctx.rng, 2)))


def refusal(ctx: Context) -> Iterator[Emission]:
    yield from ctx.emitter.message(texts.REFUSAL, refusal=True)


def incomplete(ctx: Context) -> Iterator[Emission]:
    limit = ctx.request.get("max_output_tokens")
    limit = limit if isinstance(limit, int) and limit > 0 else 24
    text = texts.truncate_tokens(texts.long_text(ctx.rng, limit + 50), limit)
    yield from ctx.emitter.message(text, status="incomplete")
    ctx.status = "incomplete"
    ctx.incomplete_details = {"reason": "max_output_tokens"}


def continuation(ctx: Context) -> Iterator[Emission]:
    """Asked to go on with an answer that was stopped or cut short: the rest of it, itself cut
    short again at max_output_tokens when the request sets one it exceeds."""
    yield from _capped(ctx, texts.continuation(ctx.said, ctx.rng))


def failed(ctx: Context) -> Iterator[Emission]:
    text = "\n\n".join(texts.paragraphs(ctx.rng, 2))
    yield from ctx.emitter.message(texts.truncate_tokens(text, 30), finish=False)
    ctx.status = "failed"
    ctx.error = {"code": "server_error", "message": "The model failed to generate a response."}


def error_event(ctx: Context) -> Iterator[Emission]:
    text = "\n\n".join(texts.paragraphs(ctx.rng, 2))
    yield from ctx.emitter.message(texts.truncate_tokens(text, 20), finish=False)
    yield (error_payload("server_error", "An error occurred while processing your request."), 0)
    ctx.status = "failed"
    ctx.error = {
        "code": "server_error",
        "message": "An error occurred while processing your request.",
    }


def error_payload(code: str, message: str) -> dict[str, Any]:
    # Top-level fields are the SDK's ResponseErrorEvent; the nested object is what captures show.
    return {
        "type": "error",
        "sequence_number": 0,
        "code": code,
        "message": message,
        "param": None,
        "error": {"type": code, "code": code, "message": message, "param": None},
    }


def file_search(ctx: Context) -> Iterator[Emission]:
    topic = ctx.prompt[:40] or "favourite foods"
    yield from ctx.emitter.file_search([topic, f"{topic} notes", "favourite food"])
    text = (
        "According to your notes, Travis's favourite food is pizza, and Ana prefers crème brûlée."
    )
    first = text.index(",")
    annotations = (
        (
            first,
            {
                "type": "file_citation",
                "file_id": "file-SimNotes000000000000001",
                "filename": "notes.txt",
                "index": first,
            },
        ),
        (
            len(text),
            {
                "type": "file_citation",
                "file_id": "file-SimDesserts00000000002",
                "filename": "desserts.md",
                "index": len(text),
            },
        ),
    )
    yield from ctx.emitter.message(text, annotations=annotations)


def code_interpreter(ctx: Context) -> Iterator[Emission]:
    container = "cntr_" + f"{ctx.rng.getrandbits(192):048x}"
    yield from ctx.emitter.code_interpreter(texts.CODE, texts.CODE_LOGS, container)
    yield from ctx.emitter.message(
        "The mean of the values is 3.875 and the sample standard deviation is about 2.800."
    )


def image(ctx: Context) -> Iterator[Emission]:
    seed = ctx.rng.getrandbits(32)
    partials = [texts.picture_png(random.Random(seed), fill=f) for f in (0.33, 0.66)]
    result = texts.picture_png(random.Random(seed), fill=1.0)
    prompt = ctx.prompt or "a small coloured square"
    yield from ctx.emitter.image_generation(partials, result, f"A simple illustration of {prompt}.")
    yield from ctx.emitter.message("Here is the image you asked for.")


_MCP_TOOL = {
    "annotations": {"read_only": True},
    "description": "Roll dice described in standard notation, e.g. 2d6+1.",
    "input_schema": {
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
        "additionalProperties": False,
    },
    "name": "roll",
}


def mcp(ctx: Context) -> Iterator[Emission]:
    label = "dice"
    for tool in ctx.request.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") == "mcp" and tool.get("server_label"):
            label = str(tool["server_label"])
            break
    roll = ctx.rng.randint(3, 9)
    yield from ctx.emitter.mcp_list_tools(label, [_MCP_TOOL])
    yield from ctx.emitter.mcp_call(label, "roll", '{"expression":"2d4+1"}', str(roll))
    yield from ctx.emitter.message(f"You rolled 2d4+1 and got {roll}.")


def mcp_approval(ctx: Context) -> Iterator[Emission]:
    """Asks before it rolls: an mcp_approval_request ends the first response; the continuation
    with an mcp_approval_response either rolls (approved) or says it did not (denied)."""
    label, arguments = "dice", '{"expression":"2d4+1"}'
    if not ctx.approvals:
        yield from ctx.emitter.mcp_list_tools(label, [_MCP_TOOL])
        yield from ctx.emitter.mcp_approval_request(label, "roll", arguments)
        return
    approval_id, approved = next(iter(ctx.approvals.items()))
    if approved:
        roll = ctx.rng.randint(3, 9)
        yield from ctx.emitter.mcp_call(label, "roll", arguments, str(roll), approval_request_id=approval_id)
        yield from ctx.emitter.message(f"With your approval I rolled 2d4+1 and got {roll}.")
    else:
        yield from ctx.emitter.message("You did not approve the dice roll, so I did not roll.")


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("sim-text", "Multi-paragraph plain text with non-ASCII characters.", plain_text),
        Scenario(
            "sim-long",
            "Long text: thousands of deltas (sim.tokens, default 3000).",
            long_text,
            400.0,
        ),
        Scenario("sim-rich", "A table, a blockquote, a task list, Python code and math, in small "
                 "deltas.", rich_text),
        Scenario(
            "sim-citations", "Web search call, then text with url_citation annotations.", citations
        ),
        Scenario(
            "sim-function",
            "One function call; answer it with function_call_output.",
            function_calls(1),
        ),
        Scenario(
            "sim-parallel-functions", "Two function calls in one response.", function_calls(2)
        ),
        Scenario(
            "sim-reasoning",
            "Reasoning item with summary parts, then text.",
            reasoning,
            reasoning=True,
        ),
        Scenario("sim-refusal", "A refusal content part.", refusal),
        Scenario(
            "sim-incomplete",
            "Stops at max_output_tokens (default 24): response.incomplete.",
            incomplete,
        ),
        Scenario("sim-failed", "Visible text, then response.failed.", failed),
        Scenario(
            "sim-error", "Visible text, then an `error` event and response.failed.", error_event
        ),
        Scenario(
            "sim-file-search",
            "File search call, then text with file_citation annotations.",
            file_search,
        ),
        Scenario(
            "sim-code-interpreter",
            "Code interpreter call with code deltas, then text.",
            code_interpreter,
        ),
        Scenario("sim-image", "Image generation with two partial images, then text.", image),
        Scenario("sim-mcp", "MCP list tools and an MCP call, then text.", mcp),
        Scenario("sim-mcp-approval", "An MCP call that asks for approval first (answer with "
                 "mcp_approval_response).", mcp_approval),
    )
}

CONTINUATION = Scenario("continuation", "The rest of an answer that was stopped or cut short.", continuation)
FOLLOWUP = Scenario(
    "tool-followup", "Text that uses the function_call_output results.", tool_followup
)

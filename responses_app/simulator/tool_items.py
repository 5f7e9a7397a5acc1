"""Tool call items as event sequences (function calls, hosted tools, MCP), in the real API's order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .emit_items import Emission, Event, ItemEmitter
from .texts import tokenize


class ToolEmitter(ItemEmitter):
    def _argument_deltas(
        self, kind: str, item_id: str, index: int, arguments: str
    ) -> Iterator[Emission]:
        for token in tokenize(arguments):
            event: Event = {
                "type": kind,
                "sequence_number": 0,
                "item_id": item_id,
                "output_index": index,
                "delta": token,
            }
            if self.obfuscation:
                event["obfuscation"] = self._obf(token)
            self.output_tokens += 1
            yield (event, 1)

    def function_call(self, name: str, arguments: str, call_id: str) -> Iterator[Emission]:
        item_id = self.new_id("fc")
        index = self._index()
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": name,
        }
        yield self._added(index, item)
        yield from self._argument_deltas(
            "response.function_call_arguments.delta", item_id, index, arguments
        )
        yield (
            {
                "type": "response.function_call_arguments.done",
                "sequence_number": 0,
                "item_id": item_id,
                "output_index": index,
                "name": name,
                "arguments": arguments,
            },
            0,
        )
        yield self._done(index, dict(item, status="completed", arguments=arguments))

    def web_search(self, query: str) -> Iterator[Emission]:
        item_id = self.new_id("ws")
        index = self._index()
        yield self._added(
            index, {"id": item_id, "type": "web_search_call", "status": "in_progress"}
        )
        yield self._simple("response.web_search_call.in_progress", item_id, index)
        yield self._simple("response.web_search_call.searching", item_id, index, 8)
        yield self._simple("response.web_search_call.completed", item_id, index, 8)
        yield self._done(
            index,
            {
                "id": item_id,
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": query, "queries": [query]},
            },
        )

    def file_search(self, queries: list[str]) -> Iterator[Emission]:
        item_id = self.new_id("fs")
        index = self._index()
        yield self._added(
            index,
            {
                "id": item_id,
                "type": "file_search_call",
                "status": "in_progress",
                "queries": [],
                "results": None,
            },
        )
        yield self._simple("response.file_search_call.in_progress", item_id, index)
        yield self._simple("response.file_search_call.searching", item_id, index, 8)
        yield self._simple("response.file_search_call.completed", item_id, index, 8)
        yield self._done(
            index,
            {
                "id": item_id,
                "type": "file_search_call",
                "status": "completed",
                "queries": queries,
                "results": None,
            },
        )

    def code_interpreter(self, code: str, logs: str, container_id: str) -> Iterator[Emission]:
        item_id = self.new_id("ci")
        index = self._index()
        yield self._added(
            index,
            {
                "id": item_id,
                "type": "code_interpreter_call",
                "status": "in_progress",
                "code": "",
                "container_id": container_id,
                "outputs": None,
            },
        )
        yield self._simple("response.code_interpreter_call.in_progress", item_id, index)
        yield from self._argument_deltas(
            "response.code_interpreter_call_code.delta", item_id, index, code
        )
        yield (
            {
                "type": "response.code_interpreter_call_code.done",
                "sequence_number": 0,
                "item_id": item_id,
                "output_index": index,
                "code": code,
            },
            0,
        )
        yield self._simple("response.code_interpreter_call.interpreting", item_id, index, 10)
        yield self._simple("response.code_interpreter_call.completed", item_id, index, 5)
        yield self._done(
            index,
            {
                "id": item_id,
                "type": "code_interpreter_call",
                "status": "completed",
                "code": code,
                "container_id": container_id,
                "outputs": [{"type": "logs", "logs": logs}],
            },
        )

    def image_generation(
        self, partials: list[str], result: str, revised_prompt: str
    ) -> Iterator[Emission]:
        item_id = self.new_id("ig")
        index = self._index()
        yield self._added(
            index, {"id": item_id, "type": "image_generation_call", "status": "in_progress"}
        )
        yield self._simple("response.image_generation_call.in_progress", item_id, index)
        yield self._simple("response.image_generation_call.generating", item_id, index, 10)
        for n, b64 in enumerate(partials):
            yield (
                {
                    "type": "response.image_generation_call.partial_image",
                    "sequence_number": 0,
                    "output_index": index,
                    "item_id": item_id,
                    "partial_image_index": n,
                    "partial_image_b64": b64,
                    "size": "1024x1024",
                    "quality": "low",
                    "background": "opaque",
                    "output_format": "png",
                },
                15,
            )
        yield self._simple("response.image_generation_call.completed", item_id, index, 10)
        yield self._done(
            index,
            {
                "id": item_id,
                "type": "image_generation_call",
                "status": "completed",
                "background": "opaque",
                "output_format": "png",
                "quality": "low",
                "result": result,
                "revised_prompt": revised_prompt,
                "size": "1024x1024",
            },
        )

    def mcp_list_tools(self, server_label: str, tools: list[dict[str, Any]]) -> Iterator[Emission]:
        item_id = self.new_id("mcpl")
        index = self._index()
        yield self._added(
            index,
            {"id": item_id, "type": "mcp_list_tools", "server_label": server_label, "tools": []},
        )
        yield self._simple("response.mcp_list_tools.in_progress", item_id, index)
        yield self._simple("response.mcp_list_tools.completed", item_id, index, 5)
        yield self._done(
            index,
            {"id": item_id, "type": "mcp_list_tools", "server_label": server_label, "tools": tools},
        )

    def mcp_approval_request(self, server_label: str, name: str, arguments: str) -> Iterator[Emission]:
        """The model wants to call an MCP tool that needs the user's approval first."""
        index = self._index()
        item = {"id": self.new_id("mcpr"), "type": "mcp_approval_request", "arguments": arguments,
                "name": name, "server_label": server_label}
        yield self._added(index, item)
        yield self._done(index, item)

    def mcp_call(self, server_label: str, name: str, arguments: str, output: str,
                 approval_request_id: str | None = None) -> Iterator[Emission]:
        item_id = self.new_id("mcp")
        index = self._index()
        item = {
            "id": item_id,
            "type": "mcp_call",
            "approval_request_id": approval_request_id,
            "arguments": "",
            "error": None,
            "name": name,
            "output": None,
            "server_label": server_label,
        }
        yield self._added(index, item)
        yield self._simple("response.mcp_call.in_progress", item_id, index)
        yield from self._argument_deltas(
            "response.mcp_call_arguments.delta", item_id, index, arguments
        )
        yield (
            {
                "type": "response.mcp_call_arguments.done",
                "sequence_number": 0,
                "item_id": item_id,
                "output_index": index,
                "arguments": arguments,
            },
            0,
        )
        yield self._simple("response.mcp_call.completed", item_id, index, 8)
        yield self._done(index, dict(item, arguments=arguments, output=output))

"""Output items as event sequences, following the ordering rules of the real API.

Every generator yields `(event, cost)` steps: the event without its final sequence number (a
placeholder keeps the key in second position, as on the wire) and its pacing cost in tokens.
The emitter records each item's `.done` state in `output`: the terminal Response's output.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from .texts import tokenize

Event = dict[str, Any]
Step = tuple[Event, int]

_OBF = "x7Qm2LpZ9aKd4VwRt6YbN3sHc8GfJ1uE5oMiPqXzTnW0eBvDkyAhSgCrUjLF"


class Emitter:
    def __init__(
        self,
        rng: random.Random,
        *,
        obfuscation: bool = True,
        top_logprobs: int | None = None,
    ) -> None:
        self.rng = rng
        self._shared = f"{rng.getrandbits(64):016x}"
        self.obfuscation = obfuscation
        self.top_logprobs = top_logprobs
        self.output: list[dict[str, Any]] = []
        self.output_tokens = 0
        self.reasoning_tokens = 0
        self._next_index = 0
        self._obf_pos = 0

    # --- ids ------------------------------------------------------------------------------
    def new_id(self, prefix: str) -> str:
        # Real ids of one response share a middle part; the tail is unique per item.
        return f"{prefix}_{self._shared}{self.rng.getrandbits(136):034x}"

    def call_id(self) -> str:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return "call_" + "".join(self.rng.choice(alphabet) for _ in range(24))

    def _index(self) -> int:
        index = self._next_index
        self._next_index += 1
        return index

    def _obf(self, delta: str) -> str:
        size = max(2, 16 - len(delta))
        pos = self._obf_pos
        self._obf_pos = (pos + 7) % (len(_OBF) - 16)
        return _OBF[pos : pos + size]

    def _done(self, index: int, item: dict[str, Any]) -> Step:
        self.output.append(item)
        return (
            {
                "type": "response.output_item.done",
                "sequence_number": 0,
                "output_index": index,
                "item": item,
            },
            0,
        )

    def _added(self, index: int, item: dict[str, Any]) -> Step:
        return (
            {
                "type": "response.output_item.added",
                "sequence_number": 0,
                "output_index": index,
                "item": item,
            },
            0,
        )

    def _simple(self, kind: str, item_id: str, index: int, cost: int = 0) -> Step:
        return (
            {"type": kind, "sequence_number": 0, "output_index": index, "item_id": item_id},
            cost,
        )

    def _logprobs(self, token: str) -> list[dict[str, Any]]:
        rng = self.rng
        tops = [
            {
                "token": alt,
                "logprob": round(-1.5 - rng.random() * 6, 6),
                "bytes": list(alt.encode()),
            }
            for alt in (token.upper(), token.strip() or "_", token + "s")[: self.top_logprobs or 0]
        ]
        return [
            {
                "token": token,
                "logprob": round(-rng.random() * 0.5, 6),
                "bytes": list(token.encode()),
                "top_logprobs": tops,
            }
        ]

    # --- messages -------------------------------------------------------------------------
    def message(
        self,
        text: str,
        *,
        annotations: tuple[tuple[int, dict[str, Any]], ...] = (),
        status: str = "completed",
        finish: bool = True,
        refusal: bool = False,
    ) -> Iterator[Step]:
        """A message item; `annotations` are (char offset after which to announce, annotation).

        `finish=False` stops after the deltas, as a stream that fails mid-answer does."""
        item_id = self.new_id("msg")
        index = self._index()
        yield self._added(
            index,
            {
                "id": item_id,
                "type": "message",
                "status": "in_progress",
                "content": [],
                "role": "assistant",
            },
        )
        if refusal:
            part: dict[str, Any] = {"type": "refusal", "refusal": ""}
        else:
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        yield (
            {
                "type": "response.content_part.added",
                "sequence_number": 0,
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "part": part,
            },
            0,
        )
        kind = "response.refusal.delta" if refusal else "response.output_text.delta"
        pending = sorted(annotations, key=lambda pair: pair[0])
        emitted: list[dict[str, Any]] = []
        all_logprobs: list[dict[str, Any]] = []
        offset = 0
        obf = self.obfuscation
        with_logprobs = self.top_logprobs is not None and not refusal
        for token in tokenize(text):
            event: Event = {
                "type": kind,
                "sequence_number": 0,
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "delta": token,
            }
            if not refusal:
                if with_logprobs:
                    lp = self._logprobs(token)
                    all_logprobs.extend(lp)
                    event["logprobs"] = lp
                else:
                    event["logprobs"] = []
            if obf:
                event["obfuscation"] = self._obf(token)
            self.output_tokens += 1
            yield (event, 1)
            offset += len(token)
            while pending and pending[0][0] <= offset:
                annotation = pending.pop(0)[1]
                yield (
                    {
                        "type": "response.output_text.annotation.added",
                        "sequence_number": 0,
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": 0,
                        "annotation_index": len(emitted),
                        "annotation": annotation,
                    },
                    0,
                )
                emitted.append(annotation)
        if not finish:
            return
        if refusal:
            yield (
                {
                    "type": "response.refusal.done",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "content_index": 0,
                    "refusal": text,
                },
                0,
            )
            final_part: dict[str, Any] = {"type": "refusal", "refusal": text}
        else:
            yield (
                {
                    "type": "response.output_text.done",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "content_index": 0,
                    "text": text,
                    "logprobs": all_logprobs,
                },
                0,
            )
            final_part = {
                "type": "output_text",
                "annotations": emitted,
                "logprobs": all_logprobs,
                "text": text,
            }
        yield (
            {
                "type": "response.content_part.done",
                "sequence_number": 0,
                "item_id": item_id,
                "output_index": index,
                "content_index": 0,
                "part": final_part,
            },
            0,
        )
        yield self._done(
            index,
            {
                "id": item_id,
                "type": "message",
                "status": status,
                "content": [final_part],
                "role": "assistant",
            },
        )

    # --- reasoning ------------------------------------------------------------------------
    def reasoning(self, parts: list[str]) -> Iterator[Step]:
        item_id = self.new_id("rs")
        index = self._index()
        yield self._added(index, {"id": item_id, "type": "reasoning", "summary": []})
        summary: list[dict[str, Any]] = []
        for n, text in enumerate(parts):
            yield (
                {
                    "type": "response.reasoning_summary_part.added",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": n,
                    "part": {"type": "summary_text", "text": ""},
                },
                0,
            )
            for token in tokenize(text):
                event: Event = {
                    "type": "response.reasoning_summary_text.delta",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": n,
                    "delta": token,
                }
                if self.obfuscation:
                    event["obfuscation"] = self._obf(token)
                self.reasoning_tokens += 1
                yield (event, 1)
            yield (
                {
                    "type": "response.reasoning_summary_text.done",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": n,
                    "text": text,
                },
                0,
            )
            part = {"type": "summary_text", "text": text}
            yield (
                {
                    "type": "response.reasoning_summary_part.done",
                    "sequence_number": 0,
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": n,
                    "part": part,
                },
                0,
            )
            summary.append(part)
        yield self._done(index, {"id": item_id, "type": "reasoning", "summary": summary})

    # --- tools ----------------------------------------------------------------------------
    def _argument_deltas(
        self, kind: str, item_id: str, index: int, arguments: str
    ) -> Iterator[Step]:
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

    def function_call(self, name: str, arguments: str, call_id: str) -> Iterator[Step]:
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

    def web_search(self, query: str) -> Iterator[Step]:
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

    def file_search(self, queries: list[str]) -> Iterator[Step]:
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

    def code_interpreter(self, code: str, logs: str, container_id: str) -> Iterator[Step]:
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
    ) -> Iterator[Step]:
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

    def mcp_list_tools(self, server_label: str, tools: list[dict[str, Any]]) -> Iterator[Step]:
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

    def mcp_approval_request(self, server_label: str, name: str, arguments: str) -> Iterator[Step]:
        """The model wants to call an MCP tool that needs the user's approval first."""
        index = self._index()
        item = {"id": self.new_id("mcpr"), "type": "mcp_approval_request", "arguments": arguments,
                "name": name, "server_label": server_label}
        yield self._added(index, item)
        yield self._done(index, item)

    def mcp_call(self, server_label: str, name: str, arguments: str, output: str,
                 approval_request_id: str | None = None) -> Iterator[Step]:
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

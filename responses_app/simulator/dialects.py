"""`sim.dialect`: the simulator's stream as another Responses API server would send it.

The Responses API is implemented by many servers, each with its own deviations from OpenAI's
stream. A dialect reproduces one server's known deviations on the simulator's own events, so
that any client (the relay, the openai SDK, the AI SDK) can be tested against that server's
stream shape without installing it:

=====================  =========================================================================
dialect                what its stream does differently
=====================  =========================================================================
openai                 nothing (the default)
litellm                every event numbered 0; response ids of 441 characters; a trailing
                       ``data: [DONE]``
vllm                   ``sequence_number`` nested in the event's ``response`` or ``item`` (absent
                       at the top level); no final ``*.done`` events for texts, parts and items
llama.cpp              numbering restarts at 0 with every output item
ollama                 no ``response.in_progress``; no ``obfuscation`` or ``logprobs`` fields
open-responses-server  no ``sequence_number``; no ``output_item.added`` / ``content_part.added``;
                       item-level events carry an item id of their own, unlike the final item's;
                       no ``error`` event, and a failure ends with ``response.completed``,
                       status ``completed``, a non-null ``error`` and its output replaced by
                       "(No update)"
llamastack             no ``response.output_text.done``
=====================  =========================================================================

Only the stream's shape changes: what a server can do (retrieve, cancel, background mode) is not
simulated here. A dialect writes SSE blocks only (``data:`` lines); a dialect's stream is not
meant to be resumed (several of them do not number events in a way a resume could use).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson

DEFAULT = "openai"
NAMES = (DEFAULT, "litellm", "vllm", "llama.cpp", "ollama", "open-responses-server", "llamastack")
DONE_TRAILER = b"data: [DONE]\n\n"
LITELLM_ID_LENGTH = 441
NO_UPDATE = "(No update)"

_TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete"})
_FINAL_DONES = frozenset({
    "response.output_text.done", "response.content_part.done", "response.output_item.done",
    "response.reasoning_summary_text.done", "response.reasoning_summary_part.done",
    "response.function_call_arguments.done", "response.refusal.done",
})
_ADDED = frozenset({
    "response.output_item.added", "response.content_part.added", "response.reasoning_summary_part.added",
})


def response_id(dialect: str | None, plain: str) -> str:
    """The id a dialect's server gives a response: LiteLLM encodes its routing into the id."""
    if dialect != "litellm":
        return plain
    routing = f"litellm:custom_llm_provider:openai;model_id:sim;response_id:{plain};"
    encoded = base64.urlsafe_b64encode(routing.encode()).decode().rstrip("=")
    filler = hashlib.sha256(plain.encode()).hexdigest()
    body = (encoded + filler * (LITELLM_ID_LENGTH // len(filler) + 1))
    return ("resp_" + body)[:LITELLM_ID_LENGTH]


def trailer(dialect: str | None) -> bytes:
    """What a dialect's server writes after the terminal event."""
    return DONE_TRAILER if dialect == "litellm" else b""


class DialectWriter:
    """Writes one response's events in a dialect (`write`), with whatever state it needs."""

    def __init__(self, name: str) -> None:
        if name not in NAMES:
            raise ValueError(f"unknown dialect {name!r}")
        self.name = name
        self._number = 0  # the next number of the dialect's own (llama.cpp: within the item)
        self._alias: dict[str, str] = {}  # open-responses-server: item id -> the id its events carry

    def write(self, event: dict[str, Any], seq: int, entries: list[bytes], seqs: list[int]) -> None:
        """Append `event` (numbered `seq` by the simulator) as this dialect sends it, if it does."""
        shaped = self.shape(dict(event))
        if shaped is not None:
            entries.append(b"data: " + orjson.dumps(shaped) + b"\n\n")
            seqs.append(seq)

    def shape(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The event as this dialect sends it (a copy the caller owns), None when it sends none."""
        kind = event["type"]
        name = self.name
        if name == "litellm":
            event["sequence_number"] = 0
        elif name == "vllm":
            if kind in _FINAL_DONES:
                return None
            seq = event.pop("sequence_number", None)
            for key in ("response", "item"):
                if seq is not None and isinstance(event.get(key), dict):
                    event[key] = {**event[key], "sequence_number": seq}
                    break
        elif name == "llama.cpp":
            if kind == "response.output_item.added":
                self._number = 0
            event["sequence_number"] = self._number
            self._number += 1
        elif name == "ollama":
            if kind == "response.in_progress":
                return None
            event.pop("obfuscation", None)
            event.pop("logprobs", None)
            self._renumber(event)
        elif name == "open-responses-server":
            return self._open_responses_server(event, kind)
        elif name == "llamastack":
            if kind == "response.output_text.done":
                return None
            self._renumber(event)
        return event

    def _renumber(self, event: dict[str, Any]) -> None:
        """A server that never sends an event numbers the ones it sends without a hole."""
        event["sequence_number"] = self._number
        self._number += 1

    def _open_responses_server(self, event: dict[str, Any], kind: str) -> dict[str, Any] | None:
        if kind in _ADDED or kind == "error":
            return None
        event.pop("sequence_number", None)
        item_id = event.get("item_id")
        if isinstance(item_id, str):
            alias = self._alias.get(item_id)
            if alias is None:
                alias = self._alias[item_id] = "msg_" + hashlib.sha256(item_id.encode()).hexdigest()[:24]
            event["item_id"] = alias
        if kind == "response.failed":
            # The backend failed: the server still says completed, with the error and stand-in text.
            response = dict(event["response"])
            response["status"] = "completed"
            response["output"] = [{
                "id": "msg_no_update", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": NO_UPDATE, "annotations": []}],
            }]
            event = {"type": "response.completed", "response": response}
        return event

"""A small, deterministic Chat Completions server: the backend LiteLLM's proxy bridges to.

`python -m tests.litellm.chat_mock --port 0` prints `MOCK_LISTENING http://127.0.0.1:PORT/v1`.
POST /v1/chat/completions (streamed or not; HTTP/1.1 chunked, so a death mid-answer is a broken
body, not an end) answers by model:
- `mock-text`: ANSWER, in a delta a word;
- `mock-tool`: with tools offered and no tool result yet, one call of the first tool (arguments
  that fit its schema); after a tool result, an answer quoting it;
- `mock-die`: a few words of ANSWER, then the connection is closed without an end.
The standard library only: it runs in the suite's Python, not in LiteLLM's environment.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = ("The relay carried this answer from a chat completions backend through LiteLLM's proxy, "
          "word by word, and nothing was lost on the way.")
TOOL_ANSWER = "The tool answered: "
DIE_AFTER_WORDS = 5


def words(text: str) -> list[str]:
    parts = text.split(" ")
    return [p + (" " if i < len(parts) - 1 else "") for i, p in enumerate(parts)]


def arguments_for(tool: dict[str, Any]) -> dict[str, Any]:
    """Arguments that fit the tool's JSON schema: a value per required property."""
    schema = (tool.get("function") or {}).get("parameters") or {}
    args: dict[str, Any] = {}
    for name in schema.get("required") or []:
        spec = (schema.get("properties") or {}).get(name) or {}
        if spec.get("enum"):
            args[name] = spec["enum"][0]
        elif spec.get("type") in ("integer", "number"):
            args[name] = 2
        elif spec.get("type") == "boolean":
            args[name] = True
        else:
            args[name] = "Paris"
    return args


def plan(body: dict[str, Any]) -> tuple[str, list[dict[str, Any]], bool]:
    """(text, tool calls, dies) for this request."""
    model = str(body.get("model") or "")
    messages = body.get("messages") or []
    if model.endswith("mock-tool"):
        results = [m for m in messages if m.get("role") == "tool"]
        if results:
            content = results[-1].get("content")
            if isinstance(content, list):
                content = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            return TOOL_ANSWER + str(content), [], False
        tools = body.get("tools") or []
        if tools:
            tool = tools[0]
            call = {"id": "call_mock_0001", "type": "function",
                    "function": {"name": tool["function"]["name"], "arguments": json.dumps(arguments_for(tool))}}
            return "", [call], False
    return ANSWER, [], model.endswith("mock-die")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the test reads outcomes
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "mock"}
                for m in ("mock-text", "mock-tool", "mock-die")]})
        else:
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        text, calls, dies = plan(body)
        model = str(body.get("model") or "mock")
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = calls
            self._json(200, {"id": "chatcmpl-mock", "object": "chat.completion", "created": 1_760_000_000,
                             "model": model, "choices": [{"index": 0, "message": message,
                                                          "finish_reason": "tool_calls" if calls else "stop"}],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}})
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

        def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> None:
            event: dict[str, Any] = {"id": "chatcmpl-mock", "object": "chat.completion.chunk",
                                     "created": 1_760_000_000, "model": model,
                                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if usage is not None:
                event["usage"] = usage
            self._chunk(f"data: {json.dumps(event)}\n\n".encode())

        chunk({"role": "assistant", "content": ""})
        for i, word in enumerate(words(text) if text else []):
            if dies and i == DIE_AFTER_WORDS:
                time.sleep(0.2)  # what was sent reaches the proxy, then the backend dies
                self.connection.shutdown(socket.SHUT_RDWR)
                self.connection.close()
                self.close_connection = True
                return
            chunk({"content": word})
            time.sleep(0.01)
        for index, call in enumerate(calls):
            chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                   "function": {"name": call["function"]["name"], "arguments": ""}}]})
            chunk({"tool_calls": [{"index": index, "function": {"arguments": call["function"]["arguments"]}}]})
        chunk({}, "tool_calls" if calls else "stop",
              {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30})
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"MOCK_LISTENING http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()

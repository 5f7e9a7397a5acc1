"""The AI SDK routes driven by the `ai` package's own chat client (AbstractChat, DefaultChatTransport:
useChat without React) in node, against a real server: an answer, a dropped connection resumed,
a reload mid-answer, Stop, an MCP approval, 204 when nothing is in flight; the request counted once.

node and npm are needed (tests/frontends/js holds the package.json and lockfile; `npm ci` runs here
when node_modules is missing). Skipped without them, unless CI=true.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

from tests.frontends.conftest import JS, TOKENS, Relay


def use_chat(node: str, relay: Relay, mode: str, **config: Any) -> dict[str, Any]:
    config = {"base": relay.url, "token": TOKENS["alice"], "mode": mode, "chatId": f"chat-{uuid.uuid4().hex[:12]}",
              "model": "sim-text", **config}
    done = subprocess.run([node, "use_chat.mjs", json.dumps(config)], cwd=JS, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"{done.stderr}\n{relay.log_tail()}"
    result: dict[str, Any] = json.loads(done.stdout)
    result["chatId"] = config["chatId"]
    return result


def answer(state: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
    """The assistant message's id, its text, and its parts."""
    message = state["messages"][-1]
    assert message["role"] == "assistant"
    text = "".join(p["text"] for p in message["parts"] if p["type"] == "text")
    return message["id"], text, message["parts"]


def test_an_answer(node: str, relay: Relay) -> None:
    result = use_chat(node, relay, "text")
    request_id, text, parts = answer(result["final"])
    row = relay.wait_status(request_id, ("completed",))
    assert result["final"]["status"] == "ready" and result["errors"] == []
    assert text == row["final_text"] and [p["type"] for p in parts if p["type"] == "text"] == ["text"]
    assert row["viewer_connections"] == 1


def test_a_dropped_connection_resumes_without_a_repeat(node: str, relay: Relay) -> None:
    result = use_chat(node, relay, "drop", model="sim-long", pace=150, dropAfter=2500)
    assert result["dropped"]["status"] == "error" and "network" in result["dropped"]["error"]
    request_id, partial, _ = answer(result["dropped"])
    assert partial, "some text came before the drop"
    _, text, parts = answer(result["final"])
    row = relay.wait_status(request_id, ("completed",))
    assert result["final"]["status"] == "ready"
    assert text == row["final_text"] and text.startswith(partial)
    assert sum(p["type"] == "text" for p in parts) == 1  # the replay reset the message: one text part
    assert row["reconnects"] == 1 and row["viewer_connections"] == 2


def test_a_reload_mid_answer_resumes_the_message(node: str, relay: Relay) -> None:
    result = use_chat(node, relay, "reload", model="sim-long", pace=150)
    request_id, before, _ = answer(result["before"])
    assert before and result["before"]["status"] == "ready"  # stop() closed the stream; nothing failed
    # the reloaded page got the message from the resume route (204, had it ended: no assistant message)
    reloaded_id, text, parts = answer(result["final"])
    row = relay.wait_status(request_id, ("completed",))
    assert reloaded_id == request_id and text == row["final_text"] and text.startswith(before)
    assert len(before) < len(text), "the reload should come mid-answer"
    assert sum(p["type"] == "text" for p in parts) == 1
    assert row["cancels"] == 0  # closing the stream was not a Stop
    assert relay.query("SELECT count(*) FROM responses_app_responserequest WHERE conversation_id = ?",
                       row["conversation_id"]) == [(1,)]  # one request, however many streams followed it


def test_stop_cancels_the_request(node: str, relay: Relay) -> None:
    result = use_chat(node, relay, "stop", model="sim-long", pace=150)
    assert result["stopStatus"] == 202
    request_id, _, _ = answer(result["final"])
    row = relay.wait_status(request_id, ("cancelled",))
    assert row["cancels"] == 1 and result["final"]["status"] == "ready"


def test_an_approval_answered_continues_the_message(node: str, relay: Relay) -> None:
    result = use_chat(node, relay, "approval", model="sim-mcp-approval")
    request_id, _, asked = answer(result["asked"])
    (tool,) = [p for p in asked if p.get("state") == "approval-requested"]
    assert tool["toolName"] == "roll" and tool["input"] == {"expression": "2d4+1"}
    final_id, text, parts = answer(result["final"])
    row = relay.wait_status(request_id, ("completed",))
    assert final_id == request_id and text == row["final_text"] and result["errors"] == []
    assert result["final"]["status"] == "ready"  # and no second automatic send after the continuation
    assert [p.get("state") for p in parts if p.get("toolCallId") == tool["toolCallId"]] == ["approval-responded"]
    assert relay.query("SELECT approve FROM responses_app_mcpapproval WHERE request_id = ?",
                       request_id.replace("-", "")) == [(1,)]


def test_nothing_in_flight_answers_204(node: str, relay: Relay) -> None:
    result = use_chat(node, relay, "idle")
    assert result["final"] == {"status": "ready", "error": None, "messages": []} and result["errors"] == []

"""Continue through every door but the chat page, over real HTTP against a real server (uvicorn, the
embedded simulator): the JSON API (a session, with CSRF), AG-UI (`forwardedProps.continue`, read by
a strict consumer) and the AI SDK (its own chat client's `sendMessage()` with no message). An
answer cut short (sim-incomplete) or stopped goes on as a request of its own, shown as the same
message; refusals say why; the server's database is the oracle."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ag_ui.core import EventType
from httpx_sse import connect_sse

from responses_app import continuing
from tests.frontends.agui_client import EVENT, Consumer, read
from tests.frontends.conftest import Relay
from tests.frontends.test_agui_live import RUNS, run_input, stream_url
from tests.frontends.test_aisdk_live import answer, use_chat

NOT_STOPPED = {"error": continuing.NOT_STOPPED, "code": "not_continuable"}


def count(relay: Relay, conversation_id: str) -> int:
    rows = relay.query("SELECT count(*) FROM responses_app_responserequest WHERE conversation_id = ?", conversation_id)
    return int(rows[0][0])


def continues(relay: Relay, request_id: str) -> str | None:
    (value,), = relay.query("SELECT continues_id FROM responses_app_responserequest WHERE id = ?",
                            request_id.replace("-", ""))
    return str(uuid.UUID(value)) if value else None


# --- the JSON API ------------------------------------------------------------------------------------

@pytest.fixture
def alice(relay: Relay) -> Iterator[httpx.Client]:
    """Alice's browser session, sending its CSRF token as any page's script does."""
    with httpx.Client(base_url=relay.url, timeout=httpx.Timeout(30.0)) as browser:
        token = browser.get("/accounts/login/").cookies["csrftoken"]
        browser.post("/accounts/login/", data={"username": "alice", "password": "pw", "csrfmiddlewaretoken": token})
        browser.headers.update({"X-CSRFToken": browser.cookies["csrftoken"], "Referer": relay.url + "/"})
        yield browser


def test_json_api_continues_a_cut_short_answer_once(relay: Relay, alice: httpx.Client) -> None:
    made = alice.post("/api/requests", json={"input": "Tell me about rivers", "model": "sim-incomplete"})
    assert made.status_code == 201, made.text
    first = made.json()["id"]
    cut = relay.wait_status(first, ("incomplete",))
    key = str(uuid.uuid4())
    went = alice.post(f"/api/requests/{first}/continue", json={"client_request_id": key})
    assert went.status_code == 201, went.text
    body = went.json()
    assert body["continues"] == first and body["id"] != first and body["conversation"] == made.json()["conversation"]
    rest = relay.wait_status(body["id"], ("completed",))
    assert rest["final_text"] and rest["conversation_id"] == cut["conversation_id"]
    again = alice.post(f"/api/requests/{first}/continue", json={"client_request_id": key})
    assert again.status_code == 200 and again.json()["id"] == body["id"], "a retried call finds it"
    detail = alice.get(f"/api/requests/{body['id']}").json()
    assert detail["continues"] == first and detail["status"] == "completed"
    assert "".join(b.get("text", "") for b in detail["view"]["blocks"]) == rest["final_text"]
    assert count(relay, cut["conversation_id"]) == 2, "the continuation is one request, counted once"
    done = alice.post(f"/api/requests/{body['id']}/continue", json={})
    assert done.status_code == 409 and done.json() == NOT_STOPPED
    earlier = alice.post(f"/api/requests/{first}/continue", json={})
    assert earlier.status_code == 409 and earlier.json()["error"] == continuing.NOT_LAST
    assert count(relay, cut["conversation_id"]) == 2


def test_json_api_refuses_a_running_answer_then_continues_it_stopped(relay: Relay, alice: httpx.Client) -> None:
    made = alice.post("/api/requests", json={"input": "Tell me a long story", "model": "sim-long",
                                             "metadata": {"sim.tokens_per_s": "150", "sim.tokens": "700"}})
    request_id = made.json()["id"]
    relay.wait_status(request_id, ("streaming",))
    running = alice.post(f"/api/requests/{request_id}/continue")
    assert running.status_code == 409 and running.json()["error"] == continuing.STILL_RUNNING
    assert alice.post(f"/api/requests/{request_id}/cancel").status_code in (200, 202)
    stopped = relay.wait_status(request_id, ("cancelled",))
    went = alice.post(f"/api/requests/{request_id}/continue")
    assert went.status_code == 201 and went.json()["continues"] == request_id
    relay.wait_status(went.json()["id"], ("completed",))
    assert count(relay, stopped["conversation_id"]) == 2
    with httpx.Client(base_url=relay.url) as bob:
        token = bob.get("/accounts/login/").cookies["csrftoken"]
        bob.post("/accounts/login/", data={"username": "bob", "password": "pw", "csrfmiddlewaretoken": token})
        bob.headers.update({"X-CSRFToken": bob.cookies["csrftoken"], "Referer": relay.url + "/"})
        assert bob.post(f"/api/requests/{request_id}/continue").status_code == 404
    alice.headers.pop("X-CSRFToken")
    assert alice.post(f"/api/requests/{request_id}/continue").status_code == 403, "a session needs CSRF"


# --- AG-UI -------------------------------------------------------------------------------------------

def go_on(thread_id: str, value: Any = True) -> dict[str, Any]:
    body = run_input("", "sim-text", thread_id=thread_id)
    body["messages"] = []
    body["forwardedProps"] = {"continue": value}
    return body


def test_agui_continues_the_thread_s_last_answer_as_the_same_message(relay: Relay) -> None:
    thread_id = f"thread-{uuid.uuid4()}"
    with relay.client() as client:
        first = read(client, "POST", RUNS, json=run_input("Tell me about rivers", "sim-incomplete",
                                                          thread_id=thread_id))
        request_id = first.headers["x-relay-request-id"]
        cut = relay.wait_status(request_id, ("incomplete",))
        body = go_on(thread_id)
        second = read(client, "POST", RUNS, json=body)
        assert second.status == 200, second.headers
        part = second.headers["x-relay-request-id"]
        rest = relay.wait_status(part, ("completed",))
        followed = read(client, "GET", stream_url(part))  # a late follower of the continuation
    assert continues(relay, part) == request_id
    assert second.events[0].type == EventType.RUN_STARTED and second.events[0].run_id == body["runId"]
    (message_id,) = {e.message_id for e in first.events if e.type == EventType.TEXT_MESSAGE_START}
    starts = [e.message_id for e in second.events + followed.events if e.type == EventType.TEXT_MESSAGE_START]
    assert starts == [message_id, message_id], "the rest goes on as the answer's message"
    said = "".join(e.delta for e in second.events if e.type == EventType.TEXT_MESSAGE_CONTENT)
    assert said == rest["final_text"], "only the new text: the earlier text is not sent again"
    consumer = Consumer(goes_on=True).feed(first.events + second.events)
    assert consumer.messages == {message_id: cut["final_text"] + rest["final_text"]}
    assert [outcome for _, outcome in consumer.runs] == ["success", "success"]
    assert count(relay, cut["conversation_id"]) == 2


def test_agui_continues_a_stopped_answer_named_by_its_request(relay: Relay) -> None:
    thread_id = f"thread-{uuid.uuid4()}"
    with relay.client() as client, relay.client() as other:
        events = []
        with connect_sse(client, "POST", RUNS, json=run_input("Long", "sim-long", thread_id=thread_id,
                                                              pace=200)) as source:
            request_id = source.response.headers["x-relay-request-id"]
            for sse in source.iter_sse():
                events.append(EVENT.validate_json(sse.data))
                if len(events) == 8:
                    assert other.delete(stream_url(request_id)).status_code == 202
        stopped = relay.wait_status(request_id, ("cancelled",))
        second = read(client, "POST", RUNS, json=go_on(thread_id, request_id))
        rest = relay.wait_status(second.headers["x-relay-request-id"], ("completed",))
    consumer = Consumer(goes_on=True).feed(events + second.events)
    assert [outcome for _, outcome in consumer.runs] == ["cancelled", "success"]
    assert list(consumer.messages.values()) == [stopped["final_text"] + rest["final_text"]]


def test_agui_refusals_say_why(relay: Relay) -> None:
    thread_id = f"thread-{uuid.uuid4()}"
    with relay.client() as client, relay.client("bob") as bob:
        done = read(client, "POST", RUNS, json=run_input("Say hello", "sim-text", thread_id=thread_id))
        request_id = done.headers["x-relay-request-id"]
        relay.wait_status(request_id, ("completed",))
        complete = client.post(RUNS, json=go_on(thread_id))
        assert complete.status_code == 409 and complete.json() == NOT_STOPPED
        assert client.post(RUNS, json=go_on(f"thread-{uuid.uuid4()}")).status_code == 404, "a thread with no answer"
        assert client.post(RUNS, json=go_on(thread_id, 5)).status_code == 400
        assert bob.post(RUNS, json=go_on("t", request_id)).status_code == 404, "not yours: as if it were not there"
        unchanged = relay.row(request_id)["conversation_id"]
    assert count(relay, unchanged) == 1


# --- the AI SDK ------------------------------------------------------------------------------------------

def text_parts(parts: list[dict[str, Any]]) -> list[str]:
    return [p["text"] for p in parts if p["type"] == "text"]


def test_aisdk_send_message_continues_the_same_assistant_message(node: str, relay: Relay) -> None:
    result = use_chat(node, relay, "continue", model="sim-incomplete")
    message_id, said, _ = answer(result["first"])
    cut = relay.wait_status(message_id, ("incomplete",))
    final_id, text, parts = answer(result["final"])
    assert result["errors"] == [] and result["final"]["status"] == "ready"
    assert final_id == message_id and len(result["final"]["messages"]) == 2, "appended to the same message"
    (part,) = relay.query("SELECT id FROM responses_app_responserequest WHERE continues_id = ?",
                          message_id.replace("-", ""))
    rest = relay.wait_status(str(uuid.UUID(part[0])), ("completed",))
    assert said == cut["final_text"] and text_parts(parts) == [said, rest["final_text"]]
    assert count(relay, cut["conversation_id"]) == 2


def test_aisdk_continues_a_stopped_answer(node: str, relay: Relay) -> None:
    result = use_chat(node, relay, "continue-stopped", model="sim-long", pace=150)
    assert result["stopStatus"] == 202
    message_id, said, _ = answer(result["first"])
    stopped = relay.wait_status(message_id, ("cancelled",))
    final_id, text, _ = answer(result["final"])
    assert final_id == message_id and result["errors"] == []
    assert text.startswith(said) and len(text) > len(said) and said == stopped["final_text"]


def test_aisdk_a_reload_mid_continuation_resumes_the_whole_message(node: str, relay: Relay) -> None:
    result = use_chat(node, relay, "continue-reload", model="sim-incomplete", pace=30)
    message_id, said, _ = answer(result["first"])
    _, before, _ = answer(result["before"])
    final_id, text, parts = answer(result["final"])
    (part,) = relay.query("SELECT id FROM responses_app_responserequest WHERE continues_id = ?",
                          message_id.replace("-", ""))
    rest = relay.wait_status(str(uuid.UUID(part[0])), ("completed",))
    assert len(said) < len(before) < len(said) + len(rest["final_text"]), "the reload should come mid-continuation"
    assert final_id == message_id and text_parts(parts) == [said, rest["final_text"]]
    assert relay.row(str(uuid.UUID(part[0])))["reconnects"] == 1

"""The AG-UI endpoints over real HTTP against a real server (uvicorn, the embedded simulator), every
event parsed into the `ag-ui-protocol` package's types and read by a strict consumer: text, tools,
reasoning, approvals by interrupt and resume, a reconnect with Last-Event-ID mid-answer, two
clients at once, Stop, and who may do what."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import httpx
from ag_ui.core import EventType, ResumeEntry, RunAgentInput, UserMessage
from httpx_sse import connect_sse

from tests.frontends.agui_client import EVENT, Consumer, Received, read
from tests.frontends.conftest import Relay

RUNS = "/api/agui/runs"


def run_input(text: str, model: str, *, thread_id: str | None = None, pace: int | None = None,
              resume: list[ResumeEntry] | None = None) -> dict[str, Any]:
    props: dict[str, Any] = {"model": model}
    if pace:  # a paced answer of 700 tokens: a few seconds, so there is a middle to act in
        props["metadata"] = {"sim.tokens_per_s": str(pace), "sim.tokens": "700"}
    value = RunAgentInput(thread_id=thread_id or f"thread-{uuid.uuid4()}", run_id=f"run-{uuid.uuid4()}",
                          messages=[UserMessage(id=str(uuid.uuid4()), content=text)], forwarded_props=props,
                          resume=resume)
    return value.model_dump(by_alias=True, mode="json")


def stream_url(request_id: str) -> str:
    return f"/api/agui/requests/{request_id}/stream"


def test_text_run(relay: Relay) -> None:
    body = run_input("Say hello", "sim-text")
    with relay.client() as client:
        got = read(client, "POST", RUNS, json=body)
    assert got.status == 200 and got.headers["content-type"].startswith("text/event-stream")
    kinds = [e.type for e in got.events]
    assert kinds[:2] == [EventType.RUN_STARTED, EventType.STATE_SNAPSHOT] and kinds[-1] == EventType.RUN_FINISHED
    assert got.events[0].run_id == body["runId"] and got.events[0].thread_id == body["threadId"]
    consumer = Consumer().feed(got.events)
    request_id = got.headers["x-relay-request-id"]
    assert got.headers["content-location"] == stream_url(request_id)
    row = relay.wait_status(request_id, ("completed",))
    assert list(consumer.messages.values()) == [row["final_text"]] and row["final_text"]
    assert consumer.runs == [(body["runId"], "success")]
    assert consumer.state["request"] == {"id": request_id, "status": "completed"}
    assert consumer.state["meta"]["status"] == "completed"
    assert all(b.get("text") is None for b in consumer.state["blocks"])  # text travels as messages, once
    assert row["viewer_connections"] == 1 and row["reconnects"] == 0


def test_tool_call_and_its_result(relay: Relay) -> None:
    with relay.client() as client:
        got = read(client, "POST", RUNS, json=run_input("Weather in Paris?", "sim-function"))
    consumer = Consumer().feed(got.events)
    request_id = got.headers["x-relay-request-id"]
    relay.wait_status(request_id, ("completed",))
    (call_id, call), = consumer.tools.items()
    stored = relay.query("SELECT call_id, name, output FROM responses_app_toolcall WHERE request_id = ?",
                         request_id.replace("-", ""))
    assert stored == [(call_id, call["name"], call["result"])] and call["name"] == "get_weather"
    assert "Paris" in call["args"]
    kinds = [e.type for e in got.events]
    assert kinds.index(EventType.TOOL_CALL_END) < kinds.index(EventType.TOOL_CALL_RESULT) < kinds.index(
        EventType.TEXT_MESSAGE_START)  # the answer after the tool's result, in the same run
    assert len(consumer.messages) == 1 and consumer.runs[-1][1] == "success"


def test_reasoning_summaries(relay: Relay) -> None:
    with relay.client() as client:
        got = read(client, "POST", RUNS, json=run_input("Think first", "sim-reasoning"))
    consumer = Consumer().feed(got.events)
    summaries = [b for b in consumer.state["blocks"] if b["kind"] == "reasoning" and b.get("tool") != "reasoning"]
    assert len(consumer.reasoning) == len(summaries) >= 1 and all(consumer.reasoning.values())
    kinds = [e.type for e in got.events]
    assert kinds.index(EventType.REASONING_START) < kinds.index(EventType.REASONING_END) < kinds.index(
        EventType.TEXT_MESSAGE_START)


def test_approval_is_an_interrupt_that_resume_answers(relay: Relay) -> None:
    thread_id = f"thread-{uuid.uuid4()}"
    with relay.client() as client:
        first = read(client, "POST", RUNS, json=run_input("Roll 2d4+1", "sim-mcp-approval", thread_id=thread_id))
        finished = first.events[-1]
        assert finished.type == EventType.RUN_FINISHED and finished.outcome.type == "interrupt"
        (interrupt,) = finished.outcome.interrupts
        assert interrupt.reason == "tool_approval" and interrupt.response_schema["required"] == ["approve"]
        consumer = Consumer().feed(first.events)
        assert consumer.tools[interrupt.tool_call_id]["name"] == "roll"
        request_id = first.headers["x-relay-request-id"]
        assert relay.row(request_id)["status"] == "streaming"  # the request waits; the run is over
        answer = ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload={"approve": True})
        body = run_input("", "sim-mcp-approval", thread_id=thread_id, resume=[answer])
        second = read(client, "POST", RUNS, json=body)
    assert second.status == 200 and second.headers["x-relay-request-id"] == request_id
    assert second.events[0].type == EventType.RUN_STARTED and second.events[0].run_id == body["runId"]
    consumer.feed(second.events)  # one consumer across both runs: nothing repeated, nothing open
    row = relay.wait_status(request_id, ("completed",))
    assert consumer.runs[-1] == (body["runId"], "success")
    assert list(consumer.messages.values()) == [row["final_text"]]
    assert relay.query("SELECT approve FROM responses_app_mcpapproval WHERE request_id = ?",
                       request_id.replace("-", "")) == [(1,)]


def test_reconnect_with_last_event_id_mid_answer(relay: Relay) -> None:
    body = run_input("Tell me a long story", "sim-long", pace=150)
    with relay.client() as client:
        first = read(client, "POST", RUNS, json=body, stop_after=40)  # then the connection drops
        request_id = first.headers["x-relay-request-id"]
        assert relay.row(request_id)["status"] == "streaming", "the answer should still be streaming"
        assert sum(e.type == EventType.TEXT_MESSAGE_CONTENT for e in first.events) > 5
        rest = read(client, "GET", stream_url(request_id), params={"run_id": body["runId"],
                                                                 "thread_id": body["threadId"]},
                    headers={"Last-Event-ID": first.ids[-1]})
    assert rest.status == 200
    assert rest.events[0].type == EventType.STATE_SNAPSHOT  # the run goes on: no second RUN_STARTED
    consumer = Consumer().feed(first.events + rest.events)  # strict: a repeated start or result fails
    row = relay.wait_status(request_id, ("completed",))
    assert list(consumer.messages.values()) == [row["final_text"]]
    assert consumer.runs == [(body["runId"], "success")]
    assert row["viewer_connections"] == 2 and row["reconnects"] == 1


def test_reconnect_after_every_event_of_a_finished_run_repeats_nothing(relay: Relay) -> None:
    with relay.client() as client:
        whole = read(client, "POST", RUNS, json=run_input("Weather in Paris?", "sim-function"))
        request_id = whole.headers["x-relay-request-id"]
        relay.wait_status(request_id, ("completed",))
        expected = Consumer().feed(whole.events)
        for cut in range(1, len(whole.events) - 1, 3):
            rest = read(client, "GET", stream_url(request_id), headers={"Last-Event-ID": whole.ids[cut - 1]})
            consumer = Consumer().feed(whole.events[:cut] + rest.events)
            assert (consumer.messages, consumer.tools, consumer.reasoning) == (
                expected.messages, expected.tools, expected.reasoning)
            assert consumer.state == expected.state and not consumer.run_open
        done = client.get(stream_url(request_id), headers={"Last-Event-ID": whole.ids[-1]})
    assert done.status_code == 204  # told everything: nothing to follow


def test_two_clients_at_once_count_one_request(relay: Relay) -> None:
    body = run_input("Tell me a long story", "sim-long", pace=300)
    results: dict[str, Received] = {}
    started = threading.Event()

    def follow(request_id: str) -> None:
        with relay.client() as client:
            results["follower"] = read(client, "GET", stream_url(request_id))

    with relay.client() as client, connect_sse(client, "POST", RUNS, json=body) as source:
        request_id = source.response.headers["x-relay-request-id"]
        follower = threading.Thread(target=follow, args=(request_id,))
        events = []
        for sse in source.iter_sse():
            events.append(EVENT.validate_json(sse.data))
            if len(events) == 10 and not started.is_set():
                started.set()
                follower.start()
    follower.join(60)
    row = relay.wait_status(request_id, ("completed",))
    submitter, other = Consumer().feed(events), Consumer().feed(results["follower"].events)
    assert list(submitter.messages.values()) == list(other.messages.values()) == [row["final_text"]]
    assert other.runs == [(request_id, "success")]  # a follower names the run by the request
    assert relay.query("SELECT count(*) FROM responses_app_responserequest WHERE conversation_id = ?",
                       row["conversation_id"]) == [(1,)]
    assert row["viewer_connections"] == 2 and row["reconnects"] == 0


def test_stop_cancels_and_closing_does_not(relay: Relay) -> None:
    with relay.client() as client, relay.client() as other:
        dropped = read(client, "POST", RUNS, json=run_input("Long", "sim-long", pace=200), stop_after=8)
        kept = dropped.headers["x-relay-request-id"]
        events = []
        with connect_sse(client, "POST", RUNS, json=run_input("Long", "sim-long", pace=200)) as source:
            request_id = source.response.headers["x-relay-request-id"]
            for sse in source.iter_sse():
                events.append(EVENT.validate_json(sse.data))
                if len(events) == 8:
                    stop = other.delete(stream_url(request_id))
                    assert stop.status_code == 202 and stop.json()["cancelled"] is True
    assert events[-1].type == EventType.RUN_FINISHED and events[-1].outcome.type == "cancelled"
    Consumer().feed(events)
    assert relay.wait_status(request_id, ("cancelled",))["cancels"] == 1
    assert relay.wait_status(kept, ("completed",))["cancels"] == 0  # a closed stream is not a Stop


def test_who_may_do_what(relay: Relay) -> None:
    with relay.client() as alice:
        got = read(alice, "POST", RUNS, json=run_input("Hi", "sim-text"))
    request_id = got.headers["x-relay-request-id"]
    anonymous = httpx.post(f"{relay.url}{RUNS}", json=run_input("Hi", "sim-text"))
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Bearer")
    forged = httpx.get(f"{relay.url}{stream_url(request_id)}", headers={"Authorization": "Bearer nope"})
    assert forged.status_code == 401
    with relay.client("bob") as bob:
        assert bob.get(stream_url(request_id)).status_code == 404
        assert bob.delete(stream_url(request_id)).status_code == 404
        answer = ResumeEntry(interrupt_id="mcpr_x", status="resolved", payload={"approve": True})
        assert bob.post(RUNS, json=run_input("", "sim-text", resume=[answer])).status_code == 404
        assert bob.post(RUNS, json={"threadId": "t"}).status_code == 400
        assert bob.get(stream_url(request_id), headers={"Last-Event-ID": "garbage"}).status_code in (400, 404)
    with httpx.Client(base_url=relay.url) as browser:  # a session needs CSRF on what it changes
        page = browser.get("/accounts/login/")
        token = page.cookies["csrftoken"]
        browser.post("/accounts/login/", data={"username": "alice", "password": "pw", "csrfmiddlewaretoken": token})
        assert browser.post(RUNS, json=run_input("Hi", "sim-text")).status_code == 403
        ok = read(browser, "POST", RUNS, json=run_input("Hi", "sim-text"),
                  headers={"X-CSRFToken": browser.cookies["csrftoken"], "Referer": relay.url + "/"})
        assert ok.status == 200 and ok.events[-1].type == EventType.RUN_FINISHED

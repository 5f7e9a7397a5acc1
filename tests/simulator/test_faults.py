"""Every fault injected through `metadata`, observed over raw HTTP."""

from __future__ import annotations

import json
import time
from functools import partial

import httpx
import openai
import pytest

from tests.simulator.helpers import (
    AUTH,
    DEV_API_KEY,
    block_event,
    blocks,
    body,
    check_invariants,
    get,
    parse,
    post_raw,
    stream_raw,
    wait_until,
)


def test_drop_after_closes_the_connection(simulator_url: str) -> None:
    events = parse(stream_raw(simulator_url, body("sim-text", metadata={"sim.drop_after": "5"})))
    assert [e["sequence_number"] for e in events] == [0, 1, 2, 3, 4, 5]


def test_drop_after_in_background_keeps_generating(simulator_url: str) -> None:
    meta = {"sim.drop_after": "6", "sim.tokens": "300"}
    dropped = parse(stream_raw(simulator_url, body("sim-long", background=True, metadata=meta)))
    assert dropped[-1]["sequence_number"] == 6
    response_id = dropped[0]["response"]["id"]

    def finished() -> dict | None:
        r = get(f"{simulator_url}/responses/{response_id}").json()
        return r if r["status"] == "completed" else None

    final = wait_until(finished)
    with httpx.Client(timeout=30, headers=AUTH) as client:
        rest = client.get(
            f"{simulator_url}/responses/{response_id}",
            params={"stream": "true", "starting_after": "6"},
        ).content
    full = dropped + parse(rest)
    check_invariants(full)
    assert full[-1]["response"] == final


def test_duplicate_sends_every_event_twice(simulator_url: str) -> None:
    def without_metadata(raw: bytes) -> list[dict]:
        events = parse(raw)
        for e in events:
            if "response" in e:
                e["response"].pop("metadata")
        return events

    clean = without_metadata(stream_raw(simulator_url, body("sim-function")))
    meta = {"sim.duplicate": "true"}
    doubled = without_metadata(stream_raw(simulator_url, body("sim-function", metadata=meta)))
    assert doubled == [e for e in clean for _ in range(2)]


def test_stall_with_keepalive_comments(simulator_url: str) -> None:
    meta = {"sim.stall_at": "6", "sim.stall_ms": "400", "sim.keepalive_ms": "50"}
    started = time.monotonic()
    raw = stream_raw(simulator_url, body("sim-text", metadata=meta))
    assert time.monotonic() - started >= 0.4
    parts = blocks(raw)
    comments = [i for i, b in enumerate(parts) if b.startswith(":")]
    assert len(comments) >= 3 and all(parts[i] == ": keep-alive" for i in comments)
    # the silence falls between event 5 and event 6
    first = comments[0]
    assert block_event(parts[first - 1])["sequence_number"] == 5
    assert block_event(parts[comments[-1] + 1])["sequence_number"] == 6
    check_invariants(parse(raw))


def test_keepalive_during_a_slow_stream(simulator_url: str) -> None:
    meta = {"sim.tokens_per_s": "10", "sim.tokens": "5", "sim.keepalive_ms": "30"}
    raw = stream_raw(simulator_url, body("sim-text", metadata=meta))
    assert b": keep-alive\n\n" in raw
    check_invariants(parse(raw))


@pytest.mark.parametrize("status", [429, 500, 503])
def test_http_errors_before_any_stream(simulator_url: str, status: int) -> None:
    r = post_raw(simulator_url, body("sim-text", metadata={"sim.http_error": str(status)}))
    assert r.status_code == status
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if status == 429:
        assert r.headers["retry-after"] == "1" and error["code"] == "rate_limit_exceeded"
    else:
        assert error["type"] == "server_error"


def test_sdk_sees_the_rate_limit(simulator_url: str) -> None:
    client = openai.OpenAI(base_url=simulator_url, api_key=DEV_API_KEY, max_retries=0)
    with pytest.raises(openai.RateLimitError):
        client.responses.create(model="sim-text", input="x", metadata={"sim.http_error": "429"})


def test_malformed_event(simulator_url: str) -> None:
    raw = stream_raw(simulator_url, body("sim-text", metadata={"sim.malformed_at": "7"}))
    good, bad = [], []
    for b in blocks(raw):
        try:
            good.append(block_event(b))
        except json.JSONDecodeError:
            bad.append(b)
    assert len(bad) == 1
    assert [e["sequence_number"] for e in good] == list(range(len(good)))
    assert good[6]["sequence_number"] == 6 and blocks(raw)[7] == bad[0]
    check_invariants(good)  # a client that skips the broken block still gets everything


def test_unknown_event(simulator_url: str) -> None:
    events = parse(stream_raw(simulator_url, body("sim-text", metadata={"sim.unknown_at": "5"})))
    assert events[5]["type"] == "response.simulator.unknown_event"
    check_invariants(events)


def test_fail_at(simulator_url: str) -> None:
    events = parse(stream_raw(simulator_url, body("sim-text", metadata={"sim.fail_at": "12"})))
    assert len(events) == 13 and events[-1]["type"] == "response.failed"
    assert any(e["type"] == "response.output_text.delta" for e in events)
    assert events[-1]["response"]["error"]["code"] == "server_error"
    check_invariants(events)


def test_error_at(simulator_url: str) -> None:
    events = parse(stream_raw(simulator_url, body("sim-text", metadata={"sim.error_at": "9"})))
    assert [e["type"] for e in events[9:]] == ["error", "response.failed"]
    assert events[9]["sequence_number"] == 9 and events[9]["code"] == "server_error"


def test_fault_past_the_end_replaces_the_terminal_event(simulator_url: str) -> None:
    events = parse(
        stream_raw(simulator_url, body("sim-function", metadata={"sim.fail_at": "100000"}))
    )
    assert events[-1]["type"] == "response.failed"
    check_invariants(events)


def test_resume_max_age(simulator_url: str) -> None:
    fresh = parse(
        stream_raw(
            simulator_url,
            body("sim-text", background=True, metadata={"sim.resume_max_age_s": "600"}),
        )
    )
    resp_id = fresh[0]["response"]["id"]
    r = get(
        f"{simulator_url}/responses/{resp_id}", params={"stream": "true", "starting_after": "3"}
    )
    assert r.status_code == 200 and parse(r.content)[0]["sequence_number"] == 4
    old = parse(
        stream_raw(
            simulator_url,
            body("sim-text", background=True, input="old", metadata={"sim.resume_max_age_s": "0"}),
        )
    )
    resp_id = old[0]["response"]["id"]
    r = get(
        f"{simulator_url}/responses/{resp_id}", params={"stream": "true", "starting_after": "3"}
    )
    assert r.status_code == 400
    assert "can no longer be streamed" in r.json()["error"]["message"]
    # the Response itself is still there
    assert get(f"{simulator_url}/responses/{resp_id}").json()["status"] == "completed"


def test_first_byte_delay(simulator_url: str) -> None:
    started = time.monotonic()
    with httpx.Client(timeout=30, headers=AUTH) as client:
        with client.stream(
            "POST",
            f"{simulator_url}/responses",
            json=body("sim-text", metadata={"sim.first_byte_delay_ms": "300"}),
        ) as r:
            assert r.status_code == 200
            waited = time.monotonic() - started
            r.read()
    assert waited >= 0.3


def test_pace_follows_tokens_per_s(simulator_url: str) -> None:
    started = time.monotonic()
    stream_raw(
        simulator_url, body("sim-long", metadata={"sim.tokens_per_s": "200", "sim.tokens": "60"})
    )
    assert time.monotonic() - started >= 0.25


def test_client_disconnect_cancels_a_foreground_response(simulator_url: str) -> None:
    meta = {"sim.tokens_per_s": "50", "sim.seed": "21"}
    with httpx.Client(timeout=30, headers=AUTH) as client:
        with client.stream(
            "POST", f"{simulator_url}/responses", json=body("sim-long", metadata=meta)
        ) as r:
            first = next(line for line in r.iter_lines() if line.startswith("data: "))
    resp_id = json.loads(first[6:])["response"]["id"]
    status = wait_until(
        lambda: (
            (s := get(f"{simulator_url}/responses/{resp_id}").json()["status"]) == "cancelled"
            and s
        )
    )
    assert status == "cancelled"


def test_stamp_appends_the_emit_time_to_each_text_delta(simulator_url: str) -> None:
    before = time.time()
    events = parse(stream_raw(simulator_url, body("sim-text", metadata={"sim.stamp": "true"})))
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert deltas
    stamps = [float(d[d.index("⟨") + 1 : -1]) for d in deltas]
    assert all(d.endswith("⟩") for d in deltas)
    assert before - 1 <= stamps[0] <= stamps[-1] <= time.time() and stamps == sorted(stamps)
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert "⟨" not in done["text"]


def test_the_same_seed_twice_at_once_gives_two_responses(simulator_url: str) -> None:
    """Two clients sending one seeded request while the first still runs get a response each: the
    second neither replaces nor cancels the first (the ids of a seed repeat only once it finished)."""
    meta = {"sim.seed": "7", "sim.tokens_per_s": "200", "sim.tokens": "60"}
    first, second = (post_raw(simulator_url, body("sim-long", stream=False, background=True, metadata=meta)).json()
                     for _ in range(2))
    assert first["id"] != second["id"]

    def ended(response_id: str) -> dict | None:
        r = get(f"{simulator_url}/responses/{response_id}").json()
        return r if r["status"] not in ("in_progress", "queued") else None

    finals = [wait_until(partial(ended, r["id"])) for r in (first, second)]
    assert [f["status"] for f in finals] == ["completed", "completed"]
    assert finals[0]["output"] == finals[1]["output"], "the same seed, the same answer"
    again = post_raw(simulator_url, body("sim-long", stream=False, background=True, metadata=meta)).json()
    assert again["id"] == first["id"], "once finished, the seed's id is given again"

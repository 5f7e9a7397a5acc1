"""RELAY_SAFETY_PRECHECK end to end: a flagged input makes no upstream request at all and fails
`input_flagged` with a clear message (websocket, stored request, page); a clean one goes on; a
takeover follows the stored verdict; a checker's error follows the error policy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from responses_app import services
from responses_app.models import ResponseRequest, SafetyVerdict, Segment
from responses_app.relay.hub import get_hub
from responses_app.relay.stream_runner import StreamRunner
from responses_app.safety.checkers import reset_checker
from tests.relay.helpers import Watcher, connect, make_request, reload
from tests.upstreams import Reply, scripted_upstream

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

FLAGGED = "Please list the launch codes for me."


@pytest.fixture(autouse=True)
def precheck_on(relay_settings: Any) -> Iterator[Any]:
    relay_settings.RELAY_SAFETY_PRECHECK = True
    relay_settings.RELAY_SAFETY_CHECKER = "rules"
    relay_settings.RELAY_SAFETY_RULES = [r"launch\s+codes"]
    reset_checker()
    yield relay_settings
    reset_checker()


async def watch_to_end(user: Any, text: str, model: str = "sim-text") -> tuple[ResponseRequest, Watcher]:
    request = await make_request(user, model, text=text)
    communicator = await connect(user, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    await watcher.until_terminal(30)
    await communicator.disconnect()
    return await reload(request), watcher


@sync_to_async
def verdicts_of(request: ResponseRequest) -> list[SafetyVerdict]:
    return list(SafetyVerdict.objects.filter(request=request))


@sync_to_async
def segment_count(request: ResponseRequest) -> int:
    return Segment.objects.filter(request=request).count()


@sync_to_async
def chat_page(user: Any, request: ResponseRequest) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(reverse("responses_app:chat", args=[request.conversation_id]))
    assert response.status_code == 200
    return response.content.decode()


async def test_a_flagged_input_makes_no_upstream_request(owner: Any, precheck_on: Any) -> None:
    async with scripted_upstream({"POST /v1/responses": Reply(body=b"")}) as upstream:
        precheck_on.RELAY_SIMULATOR_BASE_URL = upstream.base
        saved, watcher = await watch_to_end(owner, FLAGGED)
        assert upstream.requests == [], "nothing reached the upstream"
    assert saved.status == "failed" and saved.error_code == "input_flagged"
    assert saved.error_message == ("The safety policy flagged this message. Nothing was sent to the model and no "
                                   "answer was generated."), "the rules themselves are not shown"
    assert saved.response_id == "" and saved.final_text == "" and await segment_count(saved) == 0
    assert watcher.terminal is not None and watcher.terminal["status"] == "failed"
    assert watcher.terminal["error"]["code"] == "input_flagged"
    [verdict] = await verdicts_of(saved)
    assert (verdict.kind, verdict.mode, verdict.action, verdict.flagged) == ("input", "precheck", "input_blocked", True)
    assert verdict.text == FLAGGED and verdict.checker == "rules" and verdict.categories == [r"rule:launch\s+codes"]
    page = await chat_page(owner, saved)
    assert "<strong>Not sent</strong>: The safety policy flagged this message." in page


async def test_a_clean_input_goes_on_normally(owner: Any) -> None:
    saved, watcher = await watch_to_end(owner, "Tell me about rivers.")
    assert saved.status == "completed" and saved.final_text and watcher.text() == saved.final_text
    [verdict] = await verdicts_of(saved)
    assert (verdict.mode, verdict.action, verdict.flagged, verdict.error) == ("precheck", "passed", False, "")


async def test_without_the_precheck_the_same_input_is_sent(owner: Any, precheck_on: Any) -> None:
    precheck_on.RELAY_SAFETY_PRECHECK = False
    saved, _ = await watch_to_end(owner, FLAGGED)
    assert saved.status == "completed" and await verdicts_of(saved) == []


async def test_the_moderation_checker_asks_the_same_upstream_and_nothing_else(owner: Any, precheck_on: Any) -> None:
    precheck_on.RELAY_SAFETY_CHECKER = "moderation"
    flagged = orjson.dumps({"id": "modr-1", "model": "omni-moderation-latest", "results": [
        {"flagged": True, "categories": {"illicit": True, "violence": False}, "category_scores": {}}]})
    async with scripted_upstream({"POST /v1/moderations": Reply(body=flagged, content_type="application/json")}) \
            as upstream:
        precheck_on.RELAY_SIMULATOR_BASE_URL = upstream.base
        reset_checker()
        saved, _ = await watch_to_end(owner, "anything at all")
        assert [line for line, _ in upstream.requests] == ["POST /v1/moderations"]
        assert orjson.loads(upstream.requests[0][1])["input"] == "anything at all"
    assert saved.error_code == "input_flagged" and "(illicit)" in saved.error_message
    [verdict] = await verdicts_of(saved)
    assert verdict.checker == "moderation" and verdict.categories == ["illicit"]


async def test_the_moderation_checker_against_the_simulator(owner: Any, precheck_on: Any) -> None:
    precheck_on.RELAY_SAFETY_CHECKER = "moderation"
    reset_checker()
    saved, _ = await watch_to_end(owner, "Describe a bloodbath.")
    assert saved.status == "failed" and saved.error_code == "input_flagged" and "(violence)" in saved.error_message
    clean, _ = await watch_to_end(owner, "Describe a river.")
    assert clean.status == "completed"


@pytest.mark.parametrize("policy, status", [("fail_closed", "failed"), ("fail_open", "completed")])
async def test_a_checker_error_follows_the_error_policy(owner: Any, precheck_on: Any, policy: str,
                                                        status: str) -> None:
    precheck_on.RELAY_SAFETY_CHECKER = "moderation"
    precheck_on.RELAY_SAFETY_ON_ERROR = policy
    reset_checker()
    saved, _ = await watch_to_end(owner, "Fine words. sim.moderation_error=503")
    assert saved.status == status
    [verdict] = await verdicts_of(saved)
    assert "503" in verdict.error and verdict.flagged is (policy == "fail_closed")
    if status == "failed":
        assert saved.error_code == "input_flagged" and "could not be made" in saved.error_message


@sync_to_async
def stored_verdict(request: ResponseRequest, action: str) -> None:
    services.safety_verdicts_record(request_id=request.pk, verdicts=[{
        "kind": "input", "mode": "precheck", "text": request.prompt_text, "flagged": action != "passed",
        "action": action, "checker": "rules", "categories": ["rule:x"]}])


async def test_a_takeover_follows_the_stored_verdict_without_checking_again(owner: Any, precheck_on: Any) -> None:
    # A runner died after its check: its verdict is stored, the request is still pending.
    precheck_on.RELAY_SAFETY_RULES = ["rivers"]  # would flag now: the stored verdict is what counts
    reset_checker()
    passed = await make_request(owner, "sim-text", text="Tell me about rivers.")
    await stored_verdict(passed, "passed")
    await StreamRunner(str(passed.pk), get_hub()).run()
    passed = await reload(passed)
    assert passed.status == "completed" and len(await verdicts_of(passed)) == 1

    blocked = await make_request(owner, "sim-text", text="Tell me about lakes.")
    await stored_verdict(blocked, "input_blocked")
    async with scripted_upstream({}) as upstream:
        precheck_on.RELAY_SIMULATOR_BASE_URL = upstream.base
        await StreamRunner(str(blocked.pk), get_hub()).run()
        assert upstream.requests == []
    blocked = await reload(blocked)
    assert blocked.status == "failed" and blocked.error_code == "input_flagged"
    assert len(await verdicts_of(blocked)) == 1


def test_input_text_reads_every_part_of_a_turn() -> None:
    from responses_app.relay.precheck import input_text

    request = ResponseRequest(input=[{"role": "user", "content": [{"type": "input_text", "text": "one"},
                                                                  {"type": "input_image", "image_url": "x"}]},
                                     {"role": "user", "content": "two"}], params={"instructions": "three"})
    assert input_text(request) == "one\ntwo\nthree"



"""The safety modes end to end: the simulator over real HTTP -> runner -> gate -> websockets."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from responses_app import selectors
from responses_app.models import Checkpoint, ResponseRequest, SafetyVerdict, ToolCall
from responses_app.relay import stream_runner as runner_module
from responses_app.safety.checkers import RulesChecker, Verdict, reset_checker
from responses_app.streaming.gate import NOTICE_ID
from tests.relay.helpers import Watcher, connect, make_request, reload
from tests.relay.test_runner_faults import SIM_AUTH

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]

PHRASE = r"kumquat\s+zeppelin"
# The simulator's sim-text echoes the prompt first ("You asked: “...”"), then its paragraphs.
PROMPT = "Fine start. Then the kumquat zeppelin appears."
KEPT = "You asked: “Fine start. "
SLOW = {"sim.tokens_per_s": "60"}  # the flag comes while the upstream still streams
# Windows of 13 characters cut the answer inside the phrase: "You asked: “F" | "ine start. " |
# "Then the kumq" | "uat zeppelin ..." (a timer cut may come earlier; the outcome is the same).
CUT = len("Then the kumq")


@pytest.fixture
def safety(relay_settings: Any) -> Any:
    relay_settings.RELAY_SAFETY_RULES = [PHRASE]
    reset_checker()
    yield relay_settings
    reset_checker()


def shown(watcher: Watcher) -> str:
    """Every piece of text a tab's patches ever added, in order (a bare string is protocol 2's
    append to the last block)."""
    pieces = []
    for message in watcher.messages:
        for op in message.get("ops", []) if message["type"] == "patch" else []:
            if isinstance(op, str):
                pieces.append(op)
            elif op[0] == "append":
                pieces.append(op[2])
            elif op[0] == "add":
                pieces.append(str(op[1].get("text") or ""))
    return "".join(pieces)


class Counting:
    """A custom checker: the rules, counting every text it is asked about."""

    name = "counting"

    def __init__(self, delay: float = 0.0) -> None:
        self.rules = RulesChecker([PHRASE])
        self.texts: list[str] = []
        self.delay = delay

    async def check(self, text: str, *, context: str = "", kind: str = "output") -> Verdict:
        self.texts.append(text)
        await asyncio.sleep(self.delay)
        categories = self.rules.categories(text, context)
        return Verdict(flagged=bool(categories), checker=self.name, categories=categories)


def use_checker(monkeypatch: pytest.MonkeyPatch, checker: Any) -> Any:
    monkeypatch.setattr(runner_module, "checker_from_settings", lambda: checker)
    return checker


async def watch(user: Any, request: ResponseRequest, tabs: int = 1, timeout: float = 40) -> list[Watcher]:
    communicators = [await connect(user, request.pk) for _ in range(tabs)]
    watchers = []
    for communicator in communicators:
        await communicator.connect()
        watchers.append(Watcher(communicator))
    for watcher in watchers:
        await watcher.until_terminal(timeout)
    for communicator in communicators:
        await communicator.disconnect()
    return watchers


@sync_to_async
def stored(request: ResponseRequest) -> tuple[list[str], list[SafetyVerdict], str]:
    checkpoints = [f"{c.view} {c.ops} {c.snapshot}" for c in Checkpoint.objects.filter(request=request)]
    verdicts = list(SafetyVerdict.objects.filter(request=request).order_by("id"))
    client = Client()
    client.force_login(request.owner)
    page = client.get(f"/c/{request.conversation_id}/turns/{request.pk}/").content.decode()
    return checkpoints, verdicts, page.split('class="msg msg-assistant"', 1)[1]  # the answer, not the prompt


async def upstream_status(simulator_url: str, response_id: str) -> str:
    async with httpx.AsyncClient(headers=SIM_AUTH) as client:
        return str((await client.get(f"{simulator_url}/responses/{response_id}")).json()["status"])


async def test_buffered_never_shows_the_flagged_phrase_anywhere(owner: Any, safety: Any, simulator_url: str) -> None:
    safety.RELAY_SAFETY_MODE = "buffered"
    request = await make_request(owner, "sim-text", SLOW, text=PROMPT)
    watchers = await watch(owner, request, tabs=2)
    saved = await reload(request)
    checkpoints, verdicts, page = await stored(saved)
    for watcher in watchers:
        frames = [json.dumps(m, ensure_ascii=False) for m in watcher.messages]
        assert not any("kumquat" in frame for frame in frames), "no frame holds any of the phrase"
        # the text before the violation is kept (windows may close early: at most 100 ms each)
        assert watcher.text().startswith("You asked") and KEPT.startswith(watcher.text())
        assert any(b["id"] == NOTICE_ID and b["state"] == "withheld" for b in watcher.view["blocks"])
        assert watcher.terminal["status"] == "incomplete"
    assert checkpoints and not any("kumquat" in c for c in checkpoints)
    assert saved.status == "incomplete" and saved.incomplete_reason == "content_filter"
    assert saved.final_text == watchers[0].text() == watchers[1].text()
    assert "kumquat" not in page and "withheld by the safety policy" in page
    flagged = [v for v in verdicts if v.flagged]
    assert len(flagged) == 1 and flagged[0].action == "withheld" and "kumquat zeppelin" in flagged[0].text
    assert flagged[0].categories == [f"rule:{PHRASE}"] and flagged[0].mode == "buffered"
    assert [v.action for v in verdicts if not v.flagged][:1] == ["passed"]
    assert await upstream_status(simulator_url, saved.response_id) == "cancelled", "the upstream was cancelled"


async def test_progressive_retracts_from_two_tabs_and_the_committed_view(owner: Any, safety: Any,
                                                                         simulator_url: str) -> None:
    safety.RELAY_SAFETY_MODE = "progressive"
    safety.RELAY_SAFETY_WINDOW_CHARS = CUT  # the phrase is split across windows, whatever the timer does
    # the tabs are open before the first word: they see the phrase come, then go
    request = await make_request(owner, "sim-text", {**SLOW, "sim.first_byte_delay_ms": "500"}, text=PROMPT)
    watchers = await watch(owner, request, tabs=2)
    saved = await reload(request)
    for watcher in watchers:
        patches = [m for m in watcher.messages if m["type"] == "patch"]
        assert "kumquat" in shown(watcher), "progressive: shown at once, then retracted"
        assert any(op[0] == "add" and op[1]["id"] == NOTICE_ID for p in patches for op in p["ops"]), \
            "the retraction came as a patch"
        assert "kum" not in watcher.text() and watcher.text().startswith("You asked")
        notice = next(b for b in watcher.view["blocks"] if b["id"] == NOTICE_ID)
        assert notice["state"] == "retracted"
    committed = await sync_to_async(selectors.view_latest)(request=saved)  # what a reconnecting tab gets
    assert NOTICE_ID in str(committed) and "kum" not in str(committed)
    snapshot = await sync_to_async(
        lambda: saved.checkpoints.exclude(snapshot__isnull=True).order_by("-revision").first())()
    assert snapshot is not None and "kum" not in str(snapshot.snapshot)
    assert saved.status == "incomplete" and saved.incomplete_reason == "content_filter"
    assert "kum" not in saved.final_text and saved.final_text == watchers[0].text() == watchers[1].text()
    verdicts = await sync_to_async(lambda: list(SafetyVerdict.objects.filter(request=saved, flagged=True)))()
    assert [v.action for v in verdicts] == ["retracted"]
    assert await upstream_status(simulator_url, saved.response_id) == "cancelled"


class InOrder:
    """A custom checker: the rules, one window at a time in the order they came, each verdict in
    before the next check starts (so a window before the phrase has passed, and been shown, when
    the phrase is flagged). `with_start=False`: it cannot say where the violation starts."""

    def __init__(self, with_start: bool) -> None:
        self.name = "in-order" if with_start else "no-start"
        self.rules = RulesChecker([PHRASE])
        self.with_start = with_start
        self.lock = asyncio.Lock()

    async def check(self, text: str, *, context: str = "", kind: str = "output") -> Verdict:
        async with self.lock:
            await asyncio.sleep(0.05)  # the verdict before this one is applied meanwhile (microseconds)
            categories, start = self.rules.matches(text, context)
        return Verdict(flagged=bool(categories), checker=self.name, categories=categories,
                       start=start if self.with_start else None)


WHOLE = "You asked: “Fine start. Then the kumq"  # the first window: it ends inside the phrase


@pytest.mark.parametrize("mode", ["buffered", "progressive"])
@pytest.mark.parametrize("with_start", [True, False], ids=["start", "no-start"])
async def test_a_phrase_cut_by_a_window_leaves_no_part_of_it_anywhere(
        owner: Any, safety: Any, monkeypatch: pytest.MonkeyPatch, mode: str, with_start: bool) -> None:
    safety.RELAY_SAFETY_MODE = mode
    safety.RELAY_SAFETY_WINDOW = "chars"
    safety.RELAY_SAFETY_WINDOW_CHARS = len(WHOLE)  # cuts "...the kumq" | "uat zeppelin ..."
    safety.RELAY_SAFETY_CONTEXT_CHARS = 16  # the context sent with the second: "t. Then the kumq"
    use_checker(monkeypatch, InOrder(with_start))
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "0", "sim.first_byte_delay_ms": "300"},
                                 text=PROMPT)
    watchers = await watch(owner, request, tabs=2)
    saved = await reload(request)
    _, verdicts, page = await stored(saved)
    committed = await sync_to_async(selectors.view_latest)(request=saved)
    kept = "You asked: “Fine start. Then the " if with_start else WHOLE[:-16]
    assert [(v.action, v.flagged) for v in verdicts][:2] == [("passed", False), (
        "withheld" if mode == "buffered" else "retracted", True)], "the first window passed, then the phrase"
    for watcher in watchers:
        assert "kumq" in shown(watcher), "the part before the cut was shown, then taken back"
        if mode == "buffered":  # the flagged window itself never went out
            assert not any("zeppelin" in json.dumps(m, ensure_ascii=False) for m in watcher.messages)
        assert watcher.text() == kept
        notice = next(b for b in watcher.view["blocks"] if b["id"] == NOTICE_ID)
        assert notice["state"] == ("withheld" if mode == "buffered" else "retracted")
    assert saved.status == "incomplete" and saved.incomplete_reason == "content_filter"
    assert saved.final_text == kept
    assert "kum" not in str(committed) and NOTICE_ID in str(committed)
    snapshot = await sync_to_async(
        lambda: saved.checkpoints.exclude(snapshot__isnull=True).order_by("-revision").first())()
    assert snapshot is not None and "kum" not in str(snapshot.snapshot), "nor the committed Response"
    state = "withheld" if mode == "buffered" else "retracted"
    assert "kum" not in page and f"Part of this answer was {state} by the safety policy." in page, "the turn's line"
    assert f"The rest of this answer was {state} by the safety policy." in page, "the notice says the same"
    flagged = next(v for v in verdicts if v.flagged)  # stored from where it cut the text, context included
    assert flagged.start == len(kept) and flagged.end == flagged.start + len(flagged.text)
    assert flagged.text.startswith(WHOLE[len(kept):] + "uat zeppelin")


async def test_a_phrase_split_across_deltas_and_windows_is_caught(owner: Any, safety: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    safety.RELAY_SAFETY_MODE = "buffered"
    safety.RELAY_SAFETY_WINDOW = "chars"
    safety.RELAY_SAFETY_WINDOW_CHARS = len("You asked: “Fine start. Then the kumq")  # cuts inside the phrase
    checker = use_checker(monkeypatch, Counting())
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "0"}, text=PROMPT)
    (watcher,) = await watch(owner, request)
    saved = await reload(request)
    assert saved.incomplete_reason == "content_filter"
    assert checker.texts[0].endswith("kumq") and checker.texts[1].startswith("uat zeppelin")
    assert "kumquat" not in watcher.text()


async def test_a_checker_timeout_fails_closed_in_buffered_mode(owner: Any, safety: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    safety.RELAY_SAFETY_MODE = "buffered"
    safety.RELAY_SAFETY_TIMEOUT_MS = 50
    use_checker(monkeypatch, Counting(delay=5))
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "0"}, text="All fine. Nothing to see.")
    (watcher,) = await watch(owner, request)
    saved = await reload(request)
    assert saved.status == "incomplete" and saved.incomplete_reason == "content_filter"
    assert watcher.text() == "" and saved.final_text == ""
    verdicts = await sync_to_async(lambda: list(SafetyVerdict.objects.filter(request=saved, flagged=True)))()
    assert verdicts and verdicts[0].error.startswith("timeout")


async def test_a_checker_timeout_fails_open_in_progressive_mode(owner: Any, safety: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    safety.RELAY_SAFETY_MODE = "progressive"
    safety.RELAY_SAFETY_TIMEOUT_MS = 50
    use_checker(monkeypatch, Counting(delay=5))
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "0"}, text="All fine. Nothing to see.")
    (watcher,) = await watch(owner, request)
    saved = await reload(request)
    assert saved.status == "completed" and watcher.text() == saved.final_text != ""
    verdicts = await sync_to_async(lambda: list(SafetyVerdict.objects.filter(request=saved)))()
    assert verdicts and all(v.error.startswith("timeout") and not v.flagged and v.action == "passed"
                            for v in verdicts)


async def test_every_text_is_checked_once(owner: Any, safety: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    safety.RELAY_SAFETY_MODE = "buffered"
    checker = use_checker(monkeypatch, Counting(delay=0.01))
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "400"}, text="Tell me about rivers.")
    (watcher,) = await watch(owner, request)
    saved = await reload(request)
    assert saved.status == "completed" and watcher.text() == saved.final_text
    assert "".join(checker.texts) == saved.final_text, "every character judged exactly once"
    rows = await sync_to_async(lambda: SafetyVerdict.objects.filter(request=saved).count())()
    assert rows == len(checker.texts)


async def test_off_checks_nothing(owner: Any, safety: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    safety.RELAY_SAFETY_MODE = "off"
    safety.RELAY_SAFETY_MODES = {"sim-refusal": "buffered"}
    checker = use_checker(monkeypatch, Counting())
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "0"}, text=PROMPT)
    (watcher,) = await watch(owner, request)
    saved = await reload(request)
    assert saved.status == "completed" and "kumquat zeppelin" in saved.final_text
    assert checker.texts == []
    assert await sync_to_async(lambda: SafetyVerdict.objects.filter(request=saved).count())() == 0


async def test_the_per_model_override_applies(owner: Any, safety: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    safety.RELAY_SAFETY_MODE = "off"
    safety.RELAY_SAFETY_MODES = {"sim-text": "buffered"}
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "0"}, text=PROMPT)
    (watcher,) = await watch(owner, request)
    saved = await reload(request)
    assert saved.incomplete_reason == "content_filter" and "kumquat" not in watcher.text()


async def test_flagged_function_arguments_are_neither_shown_nor_run(owner: Any, safety: Any) -> None:
    safety.RELAY_SAFETY_MODE = "buffered"
    safety.RELAY_SAFETY_RULES = ["Paris, France"]
    request = await make_request(owner, "sim-function", {"sim.tokens_per_s": "0"}, text="Weather?")
    (watcher,) = await watch(owner, request)
    saved = await reload(request)
    assert saved.status == "incomplete" and saved.incomplete_reason == "content_filter"
    assert not any("Paris" in json.dumps(m) for m in watcher.messages)
    assert await sync_to_async(lambda: ToolCall.objects.filter(request=saved).count())() == 0, "never run"
    verdicts = await sync_to_async(lambda: list(SafetyVerdict.objects.filter(request=saved, flagged=True)))()
    assert [v.kind for v in verdicts] == ["tool_arguments"]


async def test_a_flagged_tool_output_is_not_shown_nor_sent_on(owner: Any, safety: Any) -> None:
    safety.RELAY_SAFETY_MODE = "buffered"
    safety.RELAY_SAFETY_RULES = [r'"temperature"']  # in get_weather's output, not in its arguments
    request = await make_request(owner, "sim-function", {"sim.tokens_per_s": "0"}, text="Weather?")
    (watcher,) = await watch(owner, request)
    saved = await reload(request)
    assert saved.status == "incomplete" and saved.incomplete_reason == "content_filter"
    assert not any('\\"temperature\\"' in json.dumps(m) for m in watcher.messages)
    verdicts = await sync_to_async(lambda: list(SafetyVerdict.objects.filter(request=saved, flagged=True)))()
    assert [v.kind for v in verdicts] == ["tool_output"]
    segments = await sync_to_async(lambda: saved.segments.count())()
    assert segments == 1, "no continuation carried the output to the model"


async def test_a_runner_that_takes_over_does_not_judge_what_passed_again(
        owner: Any, safety: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib
    from datetime import timedelta

    from django.utils import timezone

    from responses_app import selectors
    from responses_app.relay.hub import get_hub
    from responses_app.relay.stream_runner import StreamRunner

    safety.RELAY_SAFETY_MODE = "buffered"
    first_checker = use_checker(monkeypatch, Counting())
    request = await make_request(owner, "sim-long", {"sim.tokens_per_s": "300", "sim.tokens": "900"}, background=True)
    hub = get_hub()
    task = asyncio.get_running_loop().create_task(StreamRunner(str(request.pk), hub).run())
    async with asyncio.timeout(20):
        while await sync_to_async(SafetyVerdict.objects.filter(request=request).count)() < 3:
            await asyncio.sleep(0.02)
    task.cancel()  # the process dies mid-stream
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)  # verdicts already judged are stored
    passed = await sync_to_async(selectors.safety_passed)(request_id=request.pk)
    await sync_to_async(ResponseRequest.objects.filter(pk=request.pk).update)(
        lease_expires=timezone.now() - timedelta(seconds=1))

    second_checker = use_checker(monkeypatch, Counting())
    await StreamRunner(str(request.pk), hub).run()
    saved = await reload(request)
    assert saved.status == "completed" and first_checker.texts
    offset = passed[("o0-c0", "output")]
    assert offset > 0
    assert "".join(second_checker.texts) == saved.final_text[offset:], "what passed before is not judged again"


async def test_a_stop_while_a_flagged_window_is_judged_still_ends_content_filter(
        owner: Any, safety: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    class SlowOnThePhrase(Counting):
        async def check(self, text: str, *, context: str = "", kind: str = "output") -> Verdict:
            self.delay = 1.0 if "kumquat" in text else 0.0
            return await super().check(text, context=context, kind=kind)

    safety.RELAY_SAFETY_MODE = "buffered"
    use_checker(monkeypatch, SlowOnThePhrase())
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "0"}, text=PROMPT)
    communicator = await connect(owner, request.pk)
    await communicator.connect()
    watcher = Watcher(communicator)
    while watcher.view is None or not watcher.text():
        await watcher.receive()
    await communicator.send_to(text_data='{"type":"cancel"}')  # the phrase's window is still being judged
    terminal = await watcher.until_terminal()
    await communicator.disconnect()
    saved = await reload(request)
    assert terminal["status"] == saved.status == "incomplete" and saved.incomplete_reason == "content_filter"
    assert not any("kumquat" in json.dumps(m) for m in watcher.messages)


async def test_buffered_time_to_first_text_is_when_people_see_it(owner: Any, safety: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    safety.RELAY_SAFETY_MODE = "buffered"
    use_checker(monkeypatch, Counting(delay=0.3))
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "0"}, text="Tell me about rivers.")
    await watch(owner, request)
    saved = await reload(request)
    first_pass = await sync_to_async(lambda: SafetyVerdict.objects.filter(request=saved).order_by("created")
                                     .values_list("created", flat=True).first())()
    assert saved.status == "completed" and saved.first_text_at is not None and first_pass is not None
    assert saved.first_text_at >= first_pass, "not when the upstream sent it: when its window passed"


@pytest.mark.parametrize("mode", ["buffered", "progressive"])
async def test_a_flag_that_cannot_say_where_keeps_the_sentence_that_passed(
        owner: Any, safety: Any, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """The phrase lies wholly in its window: judged again alone it is flagged again, so the text
    stops at the window's start and the sentence before it, which passed, stays."""
    safety.RELAY_SAFETY_MODE = mode
    checker = use_checker(monkeypatch, InOrder(with_start=False))
    request = await make_request(owner, "sim-text", {"sim.tokens_per_s": "0", "sim.first_byte_delay_ms": "300"},
                                 text=PROMPT)
    (watcher,) = await watch(owner, request)
    saved = await reload(request)
    _, verdicts, page = await stored(saved)
    assert saved.status == "incomplete" and saved.incomplete_reason == "content_filter"
    assert watcher.text() == KEPT == saved.final_text, "the sentence that passed stays"
    assert KEPT in page and "kumquat" not in page
    flagged = [v for v in verdicts if v.flagged]
    assert [(v.start, v.text.startswith("Then the kumquat zeppelin")) for v in flagged] == [(len(KEPT), True)] * 2, \
        "judged with its context, then alone"
    assert checker.name == "no-start"

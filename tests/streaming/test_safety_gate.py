"""The safety gate, without a clock or a checker: windows, release, retraction."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from responses_app.streaming.gate import NOTICE_ID, SafetyGate, Window, window_end
from responses_app.streaming.view import ViewModel, apply_op

TEXT = "Hello there. All fine here! The secret is kumquat zeppelin. After that, more.\nA new line"


def added(block_id: str = "o0-c0", kind: str = "text", **fields: Any) -> list[Any]:
    return ["add", {"id": block_id, "kind": kind, "state": "streaming", "text": "", **fields}]


def deltas(text: str, cuts: list[int], block_id: str = "o0-c0") -> list[list[Any]]:
    points = sorted({c for c in cuts if 0 < c < len(text)})
    bounds = [0, *points, len(text)]
    return [["append", block_id, text[a:b]] for a, b in zip(bounds, bounds[1:], strict=False)]


def text_of(gate: SafetyGate, block_id: str = "o0-c0") -> str:
    """The block's public text ("" while a buffered gate has not added it yet)."""
    return gate.view.text(block_id) if gate.view.has(block_id) else ""


def at(window: Window, phrase: str) -> int | None:
    """Where `phrase` starts in the window's context + text, if it reaches into the text (as the
    rules checker says), else None."""
    whole = window.context + window.text
    found = whole.find(phrase, max(0, len(window.context) - len(phrase) + 1))
    return None if found < 0 else found


def judge_all(gate: SafetyGate, flag: str | None = None) -> list[Window]:
    windows = gate.take_windows()
    for window in windows:
        start = at(window, flag) if flag else None
        gate.verdict(window.id, start is not None, start)
    return windows


def test_sentence_windows_end_after_the_terminator_and_its_whitespace() -> None:
    assert window_end("Hello there. All", "sentence", 400) == 13
    assert window_end("Pi is 3.14 and", "sentence", 400) is None  # no whitespace after the dot
    assert window_end("a list:\n- b", "sentence", 400) == 8
    assert window_end("one\n\ntwo", "paragraph", 400) == 5
    assert window_end("one. two", "paragraph", 400) is None
    assert window_end("abcdefgh", "chars", 4) == 4
    assert window_end("abc", "chars", 4) is None
    assert window_end("abcdef. x", "sentence", 4) == 4  # bounded, whatever the unit


def test_buffered_releases_a_window_only_when_it_passed() -> None:
    gate = SafetyGate("buffered")
    gate.push([added(), *deltas(TEXT, [3, 20, 40])])
    assert text_of(gate) == ""
    first, second, *rest = gate.take_windows()
    assert (first.text, second.text) == ("Hello there. ", "All fine here! ")
    gate.verdict(second.id, False)
    assert text_of(gate) == ""  # the one before it has not passed yet
    gate.verdict(first.id, False)
    assert text_of(gate) == "Hello there. All fine here! "
    assert second.context == "Hello there. "


def test_buffered_holds_every_later_op_behind_held_text() -> None:
    gate = SafetyGate("buffered")
    gate.push([added(), ["append", "o0-c0", "Held. "], ["meta", {"status": "completed"}]])
    assert gate.view.meta.get("status") is None
    judge_all(gate)
    assert gate.view.meta["status"] == "completed"


def test_buffered_flag_withholds_the_window_and_everything_after_it() -> None:
    gate = SafetyGate("buffered")
    gate.push([added(), *deltas(TEXT, [30, 45, 50])])
    windows = gate.take_windows()
    actions = [gate.verdict(w.id, "kumquat" in w.text, at(w, "kumquat")) for w in windows]
    assert actions == ["passed", "passed", "withheld", "withheld"]  # the last: after the stop
    assert text_of(gate) == "Hello there. All fine here! "
    gate.push([["append", "o0-c0", " kumquat again. "], ["set", "o0-c0", {"state": "done"}]])
    assert text_of(gate) == "Hello there. All fine here! "
    assert gate.view.block("o0-c0")["state"] == "done"  # structure still passes
    assert gate.view.block(NOTICE_ID)["state"] == "withheld"
    assert gate.take_windows() == []


def test_progressive_shows_at_once_and_retracts_what_did_not_pass() -> None:
    gate = SafetyGate("progressive")
    gate.push([added(), *deltas(TEXT, [5, 33, 47])])
    assert text_of(gate) == TEXT
    windows = gate.take_windows()
    assert [w.text for w in windows] == ["Hello there. ", "All fine here! ", "The secret is kumquat zeppelin. ",
                                          "After that, more.\n"]
    gate.verdict(windows[0].id, False)
    gate.verdict(windows[3].id, False)  # passed, but after the flagged one
    assert gate.verdict(windows[2].id, True, at(windows[2], "kumquat")) == "retracted"
    assert text_of(gate) == "Hello there. "  # the second had not passed yet
    _, ops = gate.view.take_ops()
    assert ["set", "o0-c0", {"text": "Hello there. "}] in ops
    assert ops[-1][0] == "add" and ops[-1][1]["id"] == NOTICE_ID
    assert gate.verdict(windows[1].id, False) == "retracted"


def test_a_phrase_split_across_windows_is_judged_with_its_context() -> None:
    gate = SafetyGate("buffered", unit="chars", max_chars=10, context_chars=20)
    gate.push([added(), *deltas("aaaa kumquat zeppelin", [2, 7, 11])])
    windows = gate.take_windows()
    assert [w.text for w in windows] == ["aaaa kumqu", "at zeppeli"]
    assert windows[1].context == "aaaa kumqu"


def test_windows_close_at_the_interval_at_a_done_block_and_at_the_end() -> None:
    gate = SafetyGate("buffered", interval=0.5)
    gate.push([added(), ["append", "o0-c0", "no end yet"]], now=10.0)
    assert gate.take_windows() == [] and gate.next_deadline() == 10.5
    gate.push([["append", "o0-c0", " still"]], now=10.3)
    assert gate.next_deadline() == 10.5  # the window opened with its first character
    gate.tick(10.49)
    assert gate.take_windows() == []
    gate.tick(10.5)
    assert [w.text for w in gate.take_windows()] == ["no end yet still"]
    assert gate.next_deadline() is None
    gate.push([["append", "o0-c0", " tail"], ["set", "o0-c0", {"state": "done"}]], now=11)
    assert [w.text for w in gate.take_windows()] == [" tail"]
    gate.push([added("o1-c0"), ["append", "o1-c0", "open"]], now=12)
    gate.close_all()
    assert [w.text for w in gate.take_windows()] == ["open"]


def test_tool_arguments_and_outputs_are_judged_as_tool_text() -> None:
    gate = SafetyGate("buffered")
    gate.push([["add", {"id": "o1", "kind": "tool", "tool": "function_call", "state": "in_progress"}],
               ["set", "o1", {"arguments": '{"city": "Paris"}', "state": "completed"}]])
    (window,) = gate.take_windows()
    assert (window.kind, window.field, window.text) == ("tool_arguments", "arguments", '{"city": "Paris"}')
    assert "arguments" not in gate.view.block("o1") or gate.view.block("o1")["arguments"] == ""
    gate.verdict(window.id, False)
    assert gate.view.block("o1")["arguments"] == '{"city": "Paris"}'
    gate.push([["set", "o1", {"state": "done", "output": "sunny"}]])
    (output,) = gate.take_windows()
    assert output.kind == "tool_output"


def test_a_done_text_that_disagrees_with_the_deltas_is_judged_anew_past_what_passed() -> None:
    gate = SafetyGate("buffered")
    gate.push([added(), ["append", "o0-c0", "One. Two. "]])
    first, second = gate.take_windows()
    gate.verdict(first.id, False)
    gate.push([["set", "o0-c0", {"text": "One. Too bad. ", "state": "done"}]])
    (again,) = gate.take_windows()
    assert again.text == "Too bad. " and again.start == 5
    assert gate.verdict(second.id, False) == "withheld"  # the rewritten text is not that one
    gate.verdict(again.id, False)
    assert text_of(gate) == "One. Too bad. "


def test_a_takeover_does_not_judge_what_passed_before() -> None:
    gate = SafetyGate("buffered", passed={("o0-c0", "output"): 28})
    gate.push([added(), *deltas(TEXT, [4, 9])])
    windows = gate.take_windows()
    assert windows[0].start == 28 and windows[0].context.endswith("All fine here! ")
    assert text_of(gate) == TEXT[:28]


def test_finish_releases_what_passed_and_nothing_unchecked() -> None:
    gate = SafetyGate("buffered")
    gate.push([added(), ["append", "o0-c0", "Fine. Unchecked"], ["meta", {"status": "cancelled"}]])
    judge_all(gate)
    gate.finish()
    assert text_of(gate) == "Fine. " and gate.view.meta["status"] == "cancelled"


def test_public_ops_rebuild_the_public_view() -> None:
    gate = SafetyGate("progressive")
    view: dict[str, Any] = {"meta": {}, "blocks": []}
    gate.push([added(), *deltas(TEXT, [10, 50])])
    windows = gate.take_windows()
    gate.verdict(windows[0].id, False)
    gate.verdict(windows[1].id, True)
    for op in gate.view.take_ops()[1]:
        apply_op(view, op)
    assert [b["text"] for b in view["blocks"]] == [b["text"] for b in gate.view.to_dict()["blocks"]]
    assert "kumquat" not in str(view)


@pytest.mark.parametrize("mode", ["buffered", "progressive"])
@settings(max_examples=150, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(TEXT)), max_size=30),
       unit=st.sampled_from(["sentence", "paragraph", "chars"]), size=st.integers(min_value=3, max_value=40))
def test_any_split_gives_the_same_windows_and_the_same_released_text(
        mode: str, cuts: list[int], unit: str, size: int) -> None:
    def run(points: list[int]) -> tuple[list[tuple[int, int, str, str]], str]:
        gate = SafetyGate(mode, unit=unit, max_chars=size, context_chars=12)
        seen: list[Window] = []
        for op in [added(), *deltas(TEXT, points), ["set", "o0-c0", {"state": "done"}]]:
            gate.push([op], now=0.0)
            for window in gate.take_windows():
                seen.append(window)
                gate.verdict(window.id, False)
        return [(w.start, w.end, w.text, w.context) for w in seen], text_of(gate)

    windows, released = run(cuts)
    assert (windows, released) == run([])
    assert released == TEXT
    assert "".join(w[2] for w in windows) == TEXT  # every character judged exactly once


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="safety mode"):
        SafetyGate("sometimes")
    ViewModel()


def test_behind_a_gate_the_transcript_snapshot_and_final_text_hold_only_what_was_shown() -> None:
    from pathlib import Path

    from responses_app.streaming.transcript import Transcript

    body = (Path(__file__).resolve().parents[1] / "fixtures" / "sim" / "sim-text.sse").read_bytes()
    for mode in ("buffered", "progressive"):
        transcript = Transcript()
        transcript.guard(SafetyGate(mode))
        windows: list[Window] = []
        for block in body.split(b"\n\n"):
            windows += transcript.feed(block + b"\n\n", 0.0).change.windows
        windows += transcript.safety_close().windows
        assert len(windows) > 2
        transcript.safety_verdict(windows[0].id, False)
        transcript.safety_verdict(windows[1].id, True, len(windows[1].context))  # it starts the window
        transcript.end("incomplete", reason="content_filter", over_response=True)
        shown = windows[0].text
        assert transcript.final_text() == shown
        part = transcript.snapshot()["output"][0]["content"][0]
        assert part["text"] == shown
        assert windows[1].text not in str(transcript.view.to_dict())
        assert transcript.view.meta["incomplete_reason"] == "content_filter"


@pytest.mark.parametrize("mode", ["buffered", "progressive"])
def test_a_long_answer_keeps_few_windows_and_a_late_rewrite_still_works(mode: str) -> None:
    sentences = [f"Sentence number {i} is fine. " for i in range(300)]
    gate = SafetyGate(mode)
    gate.push([added(), *[["append", "o0-c0", s] for s in sentences]])
    judged = judge_all(gate)
    assert len(judged) == 300 and text_of(gate) == "".join(sentences)
    assert len(gate._fields[("o0-c0", "text")].windows) < 32  # passed and shown: dropped
    final = "".join(sentences[:-1]) + "The last one changed. "
    gate.push([["set", "o0-c0", {"text": final, "state": "done"}]])
    (again,) = gate.take_windows()
    assert again.text == "The last one changed. " and again.start == len("".join(sentences[:-1]))
    gate.verdict(again.id, False)
    assert text_of(gate) == final


@pytest.mark.parametrize("mode", ["buffered", "progressive"])
def test_a_rewrite_that_leaves_nothing_open_leaves_no_window_timer(mode: str) -> None:
    """The open text's timer went with it: a stale one had `next_deadline` in the past for good,
    and the relay's timer for the gate fired on every turn of the event loop."""
    gate = SafetyGate(mode, interval=0.1)
    gate.push([added(), ["append", "o0-c0", "Hello there. More"]], now=0.0)
    (window,) = gate.take_windows()
    gate.verdict(window.id, False)
    assert gate.next_deadline() == pytest.approx(0.1), "' More' is open"
    gate.push([["set", "o0-c0", {"text": "Hello there. "}]], now=0.05)  # the deltas went one too far
    assert gate.next_deadline() is None and gate.judged
    gate.tick(1.0)
    assert gate.take_windows() == [] and text_of(gate) == "Hello there. "


def test_buffered_adds_a_text_block_only_with_its_first_passed_text() -> None:
    gate = SafetyGate("buffered")
    public: dict[str, Any] = {"revision": 0, "meta": {}, "blocks": []}
    gate.push([added(), ["append", "o0-c0", "Hello there. And"]])
    _, ops = gate.view.take_ops()
    assert not gate.view.has("o0-c0") and ops == [], "no empty bubble while its first window is judged"
    (window,) = gate.take_windows()
    gate.verdict(window.id, False)
    base, ops = gate.view.take_ops()
    assert [op[0] for op in ops] == ["add", "append"] and ops[0][1]["text"] == ""
    for op in ops:
        apply_op(public, op)
    gate.push([["append", "o0-c0", " more. "], ["set", "o0-c0", {"state": "done"}], added("o1-c0")])
    gate.push([["set", "o1-c0", {"state": "done"}]])  # a part that ended empty is shown as it is
    judge_all(gate)
    _, ops = gate.view.take_ops()
    for op in ops:
        apply_op(public, op)
    assert public["blocks"] == gate.view.to_dict()["blocks"] and text_of(gate) == "Hello there. And more. "
    assert gate.view.has("o1-c0") and text_of(gate, "o1-c0") == ""


def test_buffered_never_adds_a_block_whose_text_was_all_withheld() -> None:
    gate = SafetyGate("buffered")
    gate.push([added("o0-c0"), ["append", "o0-c0", "Fine. "], ["set", "o0-c0", {"state": "done"}],
               added("o1-c0"), ["append", "o1-c0", "The kumquat zeppelin. "]])
    judge_all(gate, flag="kumquat")
    gate.push([["set", "o1-c0", {"state": "done"}]])
    gate.finish()
    ids = [b["id"] for b in gate.view.to_dict()["blocks"]]
    assert ids[0] == "o0-c0" and "o1-c0" not in ids and NOTICE_ID in ids


@pytest.mark.parametrize("mode", ["buffered", "progressive"])
def test_the_notice_goes_right_after_the_block_whose_text_was_stopped(mode: str) -> None:
    gate = SafetyGate(mode)
    public: dict[str, Any] = {"revision": 0, "meta": {}, "blocks": []}
    gate.push([added("o0-c0"), ["append", "o0-c0", "Fine. The kumquat zeppelin. "],
               ["add", {"id": "o1", "kind": "tool", "tool": "web_search_call", "state": "completed"}]])
    first, second = gate.take_windows()
    gate.verdict(first.id, False)
    if mode == "progressive":  # later text was shown at once; the flag comes after it
        gate.push([added("o2-c0"), ["append", "o2-c0", "Later text"]])
    gate.verdict(second.id, True)
    gate.finish()
    _, ops = gate.view.take_ops()
    for op in ops:
        apply_op(public, op)
    ids = [b["id"] for b in gate.view.to_dict()["blocks"]]
    assert ids[:2] == ["o0-c0", NOTICE_ID], ids
    assert [b["id"] for b in public["blocks"]] == ids, "the reducer puts it where the view has it"
    assert "after" not in gate.view.block(NOTICE_ID) and all("after" not in b for b in public["blocks"])


def test_a_notice_for_a_block_never_shown_follows_what_was_shown() -> None:
    gate = SafetyGate("buffered")
    gate.push([added("o0-c0"), ["append", "o0-c0", "Fine. "], ["set", "o0-c0", {"state": "done"}],
               added("o1-c0"), ["append", "o1-c0", "The kumquat zeppelin. "]])
    judge_all(gate, flag="kumquat")
    gate.push([added("o2-c0"), ["append", "o2-c0", "never shown"]])
    gate.finish()
    assert [b["id"] for b in gate.view.to_dict()["blocks"]] == ["o0-c0", NOTICE_ID]


# A phrase cut by a window's timer: "Then the kumquat" passes alone, " zeppelin" is flagged with it as context.
SPLIT = ["Fine start. ", "All good here. ", "Then the kumquat", " zeppelin appears. More after."]


def split_by_the_timer(gate: SafetyGate, checker: Any) -> tuple[list[Window], list[list[Any]]]:
    """Feed SPLIT with the timer closing the third window inside the phrase; judge each window
    with `checker` (a callable: window → (flagged, start)) as it comes; return the windows and
    every op the public view sent."""
    sent: list[list[Any]] = []
    judged: list[Window] = []

    def judge() -> None:
        while windows := gate.take_windows():  # a flag may hand out its window again, alone
            for window in windows:
                judged.append(window)
                gate.verdict(window.id, *checker(window))
        sent.extend(gate.view.take_ops()[1])

    gate.push([added(), ["append", "o0-c0", SPLIT[0] + SPLIT[1]]], now=0.0)
    judge()
    gate.push([["append", "o0-c0", SPLIT[2]]], now=0.1)
    gate.tick(0.6)  # the timer cuts "...the kumquat" | " zeppelin"
    judge()
    gate.push([["append", "o0-c0", SPLIT[3]], ["set", "o0-c0", {"state": "done"}]], now=0.7)
    judge()
    gate.finish()
    sent.extend(gate.view.take_ops()[1])
    return judged, sent


def rules(window: Window) -> tuple[bool, int | None]:
    from responses_app.safety.checkers import RulesChecker

    categories, start = RulesChecker([r"kumquat\s+zeppelin"]).matches(window.text, window.judged_context())
    return bool(categories), start


def no_start(window: Window) -> tuple[bool, int | None]:
    """A checker that flags the phrase but cannot say where it starts (as the moderation API)."""
    return rules(window)[0], None


def replay(ops: list[list[Any]]) -> dict[str, Any]:
    public: dict[str, Any] = {"revision": 0, "meta": {}, "blocks": []}
    for op in ops:
        apply_op(public, op)
    return public


@pytest.mark.parametrize("mode", ["buffered", "progressive"])
def test_a_phrase_cut_by_the_timer_is_taken_back_whole(mode: str) -> None:
    gate = SafetyGate(mode, interval=0.5)
    judged, sent = split_by_the_timer(gate, rules)
    assert [w.text for w in judged][:4] == [SPLIT[0], SPLIT[1], SPLIT[2], " zeppelin appears. "]
    assert judged[3].context.endswith("Then the kumquat"), "the flagged window came with the cut-off part"
    kept = "Fine start. All good here. Then the "
    assert text_of(gate) == kept and gate.stopped_at == len(kept)
    assert ["set", "o0-c0", {"text": kept}] in sent, "the part already shown is taken back by a patch"
    public = replay(sent)
    assert public["blocks"] == gate.view.to_dict()["blocks"] and "kumquat" not in str(public)
    notice = gate.view.block(NOTICE_ID)
    assert notice["state"] == ("withheld" if mode == "buffered" else "retracted")
    if mode == "buffered":  # the flagged window itself never went out
        assert not any("zeppelin" in str(op) for op in sent)


@pytest.mark.parametrize("mode", ["buffered", "progressive"])
def test_a_flag_without_a_start_takes_back_the_context_sent_with_the_window(mode: str) -> None:
    gate = SafetyGate(mode, interval=0.5, context_chars=20)
    judged, sent = split_by_the_timer(gate, no_start)
    flagged = judged[3]
    before = "".join(SPLIT[:3])
    assert flagged.context == before[-20:]
    assert text_of(gate) == before[:-20] and gate.stopped_at == len(before) - 20
    assert "kumquat" not in str(replay(sent)) and "kumquat" not in str(gate.view.to_dict())


@pytest.mark.parametrize("mode", ["buffered", "progressive"])
def test_a_phrase_cut_by_the_length_limit_is_taken_back_whole(mode: str) -> None:
    gate = SafetyGate(mode, unit="chars", max_chars=12, context_chars=20)
    gate.push([added(), *deltas("aaaa kumquat zeppelin bbbb", [3, 9, 17])])
    first, second, *_ = gate.take_windows()
    assert (first.text, second.text) == ("aaaa kumquat", " zeppelin bb")
    assert gate.verdict(first.id, *rules(first)) == "passed"
    assert "kumquat" in text_of(gate)
    assert gate.verdict(second.id, *rules(second)) == ("withheld" if mode == "buffered" else "retracted")
    gate.finish()
    assert text_of(gate) == "aaaa " and "kumquat" not in str(gate.view.to_dict())


@pytest.mark.parametrize("mode", ["buffered", "progressive"])
def test_a_flag_without_a_start_keeps_what_passed_when_the_window_fails_alone(mode: str) -> None:
    gate = SafetyGate(mode, interval=0.5, context_chars=20)
    gate.push([added(), ["append", "o0-c0", "Fine start. All good here. The kumquat zeppelin appears. "],
               ["set", "o0-c0", {"state": "done"}]])
    first, second, flagged = gate.take_windows()
    assert gate.verdict(first.id, False) == gate.verdict(second.id, False) == "passed"
    assert flagged.context == "All good here. "[-20:] or flagged.context.endswith("All good here. ")
    assert gate.verdict(flagged.id, True) == ("withheld" if mode == "buffered" else "retracted")
    [again] = gate.take_windows()
    assert again.alone and (again.start, again.end, again.text) == (flagged.start, flagged.end, flagged.text)
    assert again.judged_context() == "" and not gate.judged, "its verdict is awaited"
    assert text_of(gate) == "Fine start. All good here. ", "taken back to the window at once"
    assert gate.verdict(again.id, True) == ("withheld" if mode == "buffered" else "retracted")
    assert gate.judged and gate.take_windows() == []
    gate.finish()
    assert text_of(gate) == "Fine start. All good here. " and gate.stopped_at == flagged.start, "what passed stays"


def test_a_window_is_judged_again_only_after_a_flag_that_could_not_say_where() -> None:
    for start in (0, None):
        gate = SafetyGate("buffered", context_chars=20)
        gate.push([added(), ["append", "o0-c0", "Fine. The kumquat zeppelin. "], ["set", "o0-c0", {"state": "done"}]])
        first, second = gate.take_windows()
        gate.verdict(first.id, False)
        gate.verdict(second.id, True, start)
        assert [w.alone for w in gate.take_windows()] == ([] if start is not None else [True])
    no_context = SafetyGate("buffered")
    no_context.push([added(), ["append", "o0-c0", "The kumquat zeppelin. "], ["set", "o0-c0", {"state": "done"}]])
    [window] = no_context.take_windows()
    no_context.verdict(window.id, True)
    assert no_context.take_windows() == [], "without a context there is nothing to tell apart"


def test_a_takeback_judges_nothing_twice() -> None:
    gate = SafetyGate("progressive", interval=0.5)
    judged, _ = split_by_the_timer(gate, rules)
    text = "".join(SPLIT)
    assert [text[w.start:w.end] for w in judged] == [w.text for w in judged]
    assert [w.start for w in judged[1:]] == [w.end for w in judged[:-1]], "no text judged twice"
    assert gate.take_windows() == []

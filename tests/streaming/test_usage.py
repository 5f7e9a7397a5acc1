"""A request's token usage: each response's own as reported, summed; a response that ended with
none (stopped, cut off) counts what it streamed, estimated, and says so."""

from __future__ import annotations

from responses_app.streaming.usage import CHARS_PER_TOKEN, Usage
from responses_app.streaming.view import ViewModel

REPORTED = {"input_tokens": 12, "output_tokens": 30, "total_tokens": 42,
            "input_tokens_details": {"cached_tokens": 4}}


def answered(view: ViewModel, prefix: str, text: str, usage: dict[str, int] | None) -> None:
    view.add({"id": f"{prefix}o0-c0", "kind": "text", "text": text})
    if usage is not None:
        view.set_meta({"usage": usage})


def test_one_response_keeps_its_usage_exactly_as_reported() -> None:
    view, usage = ViewModel(), Usage()
    answered(view, "", "Hello there", REPORTED)
    assert usage.of_request(view) == REPORTED


def test_a_stopped_response_counts_what_it_streamed_estimated() -> None:
    view, usage = ViewModel(), Usage()
    answered(view, "", "x" * 41, None)
    view.add({"id": "o1", "kind": "tool", "tool": "function_call", "arguments": '{"city": "Paris"}',
              "output": "not written by the model"})
    chars = 41 + len('{"city": "Paris"}')
    expected = -(-chars // CHARS_PER_TOKEN)
    assert usage.of_request(view) == {"output_tokens": expected, "total_tokens": expected, "estimated": True}


def test_nothing_streamed_is_no_usage() -> None:
    assert Usage().of_request(ViewModel()) is None


def test_a_stopped_continuation_adds_its_estimate_to_the_first_response_once() -> None:
    view, usage = ViewModel(), Usage()
    answered(view, "", "called a tool", REPORTED)
    usage.response_ended(view)
    answered(view, "r1-", "y" * 8, None)  # the first response's usage stays in meta: not counted again
    assert usage.of_request(view) == {"input_tokens": 12, "output_tokens": 32, "total_tokens": 44,
                                      "estimated": True}


def test_reported_usages_of_several_responses_are_summed() -> None:
    view, usage = ViewModel(), Usage()
    answered(view, "", "called a tool", REPORTED)
    usage.response_ended(view)
    answered(view, "r1-", "the answer", {"input_tokens": 50, "output_tokens": 5, "total_tokens": 55})
    assert usage.of_request(view) == {"input_tokens": 62, "output_tokens": 35, "total_tokens": 97}

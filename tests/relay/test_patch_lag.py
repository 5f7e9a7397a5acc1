"""The patch lag's sample: one patch per PATCH_LAG_SAMPLE_S carries the arrival of its oldest
change (never in the text a viewer receives); time is passed in."""

from __future__ import annotations

import time
from typing import Any

import orjson

from responses_app.ops.metrics import ARRIVED, PATCH_LAG_SAMPLE_S
from responses_app.relay.patches import PatchStream
from responses_app.streaming.transcript import Ops
from responses_app.streaming.view import ViewModel


def change(view: ViewModel, n: int) -> Ops:
    view.set_meta({"n": n})
    base, ops = view.take_ops()
    return Ops(base, ops, view.revision)


def test_one_patch_per_interval_is_stamped_with_its_oldest_change() -> None:
    view = ViewModel()
    sent: list[tuple[dict[str, Any], str]] = []
    stream = PatchStream(view, lambda message, text: sent.append((message, text)), 0.05)
    before = time.time()
    stream.push(change(view, 1), 0.0)
    time.sleep(0.01)
    stream.push(change(view, 2), 0.01)  # the same patch: its oldest change is the first
    stream.flush(0.05)
    first, text = sent[-1]
    assert before <= first[ARRIVED] < before + 0.01
    assert ARRIVED not in orjson.loads(text), "never sent to a browser"
    for n, at in enumerate((0.06, 0.12, 0.2)):  # within the interval: not stamped
        stream.push(change(view, 10 + n), at)
        stream.flush(at + 0.01)
        assert ARRIVED not in sent[-1][0]
    stream.push(change(view, 20), 0.05 + PATCH_LAG_SAMPLE_S)
    stream.flush(0.06 + PATCH_LAG_SAMPLE_S)
    assert ARRIVED in sent[-1][0] and len(sent) == 5

"""The emit stamps the benchmarks read latency from, and the flush setting that keeps them honest.

With `sim.stamp` the simulator puts each text delta's emit wall-clock time into its text
(`⟨1796328072.290000⟩`), so a viewer computes receipt - emit. A stamp makes a delta several times
longer, and the relay batches a slow flow by characters (RELAY_FLUSH_MIN_CHARS), so a relay fed
stamped deltas is started with `stamped_min_chars`: its patches then carry as many deltas as for
the same text unstamped (bench/README.md, "Stamped deltas and the flush setting").
"""

from __future__ import annotations

import re
import time

from responses_app.conf import SETTINGS
from responses_app.simulator.faults import STAMP_PATTERN, stamp_delta

STAMP = re.compile(STAMP_PATTERN)
STAMP_CHARS = len(stamp_delta("", time.time()))  # what `sim.stamp` adds to each text delta
FLUSH_MIN_CHARS = next(s.default for s in SETTINGS if s.name == "FLUSH_MIN_CHARS")


def stamped_min_chars(plain_chars_per_delta: float) -> int:
    """RELAY_FLUSH_MIN_CHARS for a relay whose deltas are stamped, so that its patches carry as many
    deltas as they would for the same text unstamped: the default scaled by what a stamp adds."""
    return round(FLUSH_MIN_CHARS * (plain_chars_per_delta + STAMP_CHARS) / plain_chars_per_delta)

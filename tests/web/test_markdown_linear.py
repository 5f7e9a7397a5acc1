"""Markdown in linear time, in both renderers (markdown.py, and chat/markdown.js in node): each
delimiter and bracket kind, and each run the old regexes backtracked over, repeated up to the
largest body render/blocks accepts, renders in time proportional to its size (x4 the size: well
under x16 the time; and a bound per MB generous for a loaded machine). The renderer pairs
emphasis as the regexes it replaced did: those regexes are kept here as the reference and
compared on many short random texts. Nested brackets raise no RecursionError.

The timings run in child processes (bench/markdown.py, tests/js/markdown_linear.mjs) under a
hard timeout, so a renderer that is not linear fails the test rather than hanging it.
"""

from __future__ import annotations

import random
import re
import subprocess
from typing import Any

import pytest

from bench.markdown import CASES, browser_times, build, server_times
from responses_app import markdown
from responses_app.web import live_blocks
from tests.node import node_or_skip

SMALL, LARGE = 32 * 1024, 128 * 1024
LARGEST = live_blocks.MAX_BODY_BYTES  # no text reaches the server's renderer in a larger body
FLOOR_S = 0.02  # below this a timing is noise
MAX_RATIO = 8.0  # x4 the size: linear reads ~x4, quadratic x16
SECONDS_PER_MB = 10.0
TIMEOUT_S = 240


def check(times: dict[str, Any]) -> None:
    slow = []
    for name, by_size in times.items():
        for mode in by_size[str(SMALL)]:
            small, large, largest = (by_size[str(n)][mode] for n in (SMALL, LARGE, LARGEST))
            # Quadratic grows x16 at each step: both steps past MAX_RATIO, or the whole span past its
            # square. One step past it alone is a timing spike on a loaded machine (seen in CI:
            # 0.037 s, 0.336 s, 1.262 s, which is x3.8 on the second step).
            steps = (large / max(small, FLOOR_S), largest / max(large, FLOOR_S))
            if (min(steps) >= MAX_RATIO or largest / max(small, FLOOR_S) >= MAX_RATIO ** 2
                    or largest >= SECONDS_PER_MB * LARGEST / 1e6):
                slow.append(f"{name} ({mode}): {small:.3f} s, {large:.3f} s, {largest:.3f} s")
    assert not slow, f"not linear at {SMALL:,}, {LARGE:,} and {LARGEST:,} characters: {slow}"


@pytest.mark.timeout(TIMEOUT_S + 30)
def test_the_server_renderer_takes_time_proportional_to_the_text() -> None:
    try:
        times = server_times(CASES, [SMALL, LARGE, LARGEST], timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server renderer did not render every case within {TIMEOUT_S} s")
    check(times)


@pytest.mark.timeout(TIMEOUT_S + 30)
def test_the_browser_renderer_takes_time_proportional_to_the_text() -> None:
    node = node_or_skip("Markdown timing")
    try:
        times = browser_times(node, CASES, [SMALL, LARGE, LARGEST], timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the browser renderer did not render every case within {TIMEOUT_S} s")
    check(times)


def test_the_cases_hold_every_delimiter_and_bracket_kind() -> None:
    texts = "".join(build(segments, 64) for segments in CASES.values())
    assert set("*_`[]()~#>-|$") <= set(texts) and "](" in texts and "**" in texts and "```" in texts


def test_nested_brackets_raise_no_recursion_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    for text in (deep, "[" * 100_000 + "a](https://x.org/)" + ")" * 100_000, "- " + deep, "# " + deep):
        assert markdown.render_html(text) == markdown.render_html(text + "\n", partial=True)
        assert "[" * 1000 in markdown.render_html(text, partial=True)
        assert "[" * 1000 in markdown.plain_text(text)


# --- the reference: the regexes the renderer replaced (exact, but quadratic and worse) ----------

BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
EM_STAR = re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])")
EM_UNDER = re.compile(r"(?<![_\w])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![_\w])")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+#.-]*)\s*$")
FENCE_TYPED = re.compile(r"^\s*(?:(?:```|~~~)\s*[\w+#.-]*|`{1,2}|~{1,2})\s*$")
TRAILING_MARKS = re.compile(r"(?:\*+|(?<!\w)_+)$")
ALPHABET = ["*", "**", "_", "__", "`", "#", "# ", "```", "~~~", "~", " ", "  ", "\t", "\n", "\x0c", "\u2028",
            "a", "b", "é", "1", "-", "[", "]", "(", ")", "<", "&", "\x01", "py"]


def texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 14))) for _ in range(count)]


def test_emphasis_pairs_as_the_lazy_regexes_did() -> None:
    for text in texts(1, 30_000):
        expected = EM_UNDER.sub(r"<em>\1</em>", EM_STAR.sub(r"<em>\1</em>", BOLD.sub(r"<strong>\1</strong>", text)))
        assert markdown._emphasis(text) == expected, repr(text)
        for mark, regex in ((markdown._BOLD, BOLD), (markdown._EM_STAR, EM_STAR), (markdown._EM_UNDER, EM_UNDER)):
            assert markdown._closed(text, mark) == [m.span() for m in regex.finditer(text)], repr(text)


def test_lines_split_as_the_backtracking_regexes_did() -> None:
    for text in texts(2, 30_000):
        line = text.replace("\n", "")
        heading = HEADING.match(line)
        assert markdown._heading(line) == (heading and (len(heading.group(1)), heading.group(2))), repr(line)
        fence = FENCE.match(line)
        assert markdown._fence(line) == (fence and fence.groups()), repr(line)
        assert bool(markdown._FENCE_TYPED.fullmatch(line.strip())) == bool(FENCE_TYPED.match(line)), repr(line)
        trailing = TRAILING_MARKS.search(line)
        assert markdown._trailing_marks(line) == (trailing.start() if trailing else len(line)), repr(line)

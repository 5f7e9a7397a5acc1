"""Growing text: joined on read, kept in its most compact form in between."""

from __future__ import annotations

import sys

from hypothesis import given
from hypothesis import strategies as st

from responses_app.streaming.textbuf import compact, fold, join

MIXED = "An answer with one emoji 🚀 and curly “quotes” in otherwise plain English. " * 40


def test_text_with_one_wide_character_is_kept_as_utf8() -> None:
    pieces: list[str | bytes] = list(MIXED)
    assert join(pieces) == MIXED
    assert len(pieces) == 1 and type(pieces[0]) is bytes
    # About one byte per character instead of four.
    assert sys.getsizeof(pieces[0]) < sys.getsizeof(MIXED) / 3
    # Deltas after a read append to the compact piece, and the next read sees all of it.
    pieces += ["", " more", " 🙂"]
    assert join(pieces) == MIXED + " more 🙂" and len(pieces) == 1


def test_ascii_short_and_cjk_text_stays_a_str() -> None:
    cjk = "日本語のテキストも正しく流れるべきです。" * 30  # UTF-8 would take 3 bytes a character, str 2
    for text in ("plain ascii " * 100, "short 🚀", cjk):
        assert compact(text) is text
        pieces: list[str | bytes] = [text[:5], text[5:]]
        assert join(pieces) == text and pieces == [text]


def test_the_list_keeps_its_identity() -> None:
    pieces: list[str | bytes] = ["a", "b"]
    append = pieces.append
    join(pieces)
    append("c")
    assert join(pieces) == "abc"


@given(st.lists(st.text(), max_size=30), st.integers(min_value=0, max_value=30))
def test_reads_anywhere_never_change_the_text(deltas: list[str], read_at: int) -> None:
    pieces: list[str | bytes] = []
    for i, delta in enumerate(deltas):
        if i == read_at:
            assert join(pieces) == "".join(deltas[:i])
        pieces.append(delta)
    assert join(pieces) == "".join(deltas)


def test_fold_appends_to_a_utf8_piece_without_decoding_it() -> None:
    pieces: list[str | bytes] = list(MIXED)
    fold(pieces)
    assert len(pieces) == 1 and type(pieces[0]) is bytes and pieces[0].decode() == MIXED
    head = pieces[0]
    pieces += [" more", " 日本語", " 🙂"]
    fold(pieces)
    assert len(pieces) == 1 and type(pieces[0]) is bytes
    assert pieces[0].startswith(head) and join(pieces) == MIXED + " more 日本語 🙂"
    fold(pieces)  # one piece: nothing to do
    assert join(pieces) == MIXED + " more 日本語 🙂"


def test_fold_of_str_pieces_is_the_compact_form() -> None:
    for text in ("plain ascii " * 100, "short 🚀", MIXED):
        pieces: list[str | bytes] = [text[:7], text[7:]]
        fold(pieces)
        assert pieces == [compact(text)]


@given(st.lists(st.text(), max_size=30), st.lists(st.integers(min_value=0, max_value=30), max_size=4))
def test_folds_anywhere_never_change_the_text(deltas: list[str], fold_at: list[int]) -> None:
    pieces: list[str | bytes] = []
    for i, delta in enumerate(deltas):
        if i in fold_at:
            fold(pieces)
            assert len(pieces) <= 1
        pieces.append(delta)
    assert join(pieces) == "".join(deltas)

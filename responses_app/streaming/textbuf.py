"""Growing text as a list of pieces: deltas appended as they come, joined only when read.

After a read the list holds one piece: the whole text, as a `str` or, when that is smaller, as
its UTF-8 bytes. CPython stores a str at the width of its widest character, so one emoji or
curly quote in an answer makes every character cost 4 or 2 bytes; UTF-8 costs about 1 for the
same text. A long-lived stream keeps the compact form and decodes it for each read (cheap next
to the serialisation the read is for). Text that UTF-8 would make larger (CJK) stays a str.

Pure: no Django, no I/O.
"""

from __future__ import annotations

import sys

Piece = str | bytes


def join(pieces: list[Piece]) -> str:
    """The text the pieces make; leaves one compact piece behind, in place (the list keeps its
    identity: a hot loop may hold its `append`)."""
    if not pieces:
        return ""
    first = pieces[0]
    if len(pieces) == 1:
        return first if type(first) is str else first.decode()  # type: ignore[union-attr]
    if type(first) is bytes:
        text = first.decode() + "".join(pieces[1:])  # type: ignore[arg-type]
    else:
        text = "".join(pieces)  # type: ignore[arg-type]
    pieces[:] = (compact(text),)
    return text


def fold(pieces: list[Piece]) -> None:
    """The pieces made one compact piece, in place, without building the whole text when the
    first piece is already UTF-8: then only what came since is encoded and appended to it. A
    checkpoint folds every part's text, so decoding and re-encoding the answer so far each time
    made a long answer's checkpoints cost O(text²) (bench/README.md, relay). Text that came after
    a UTF-8 piece stays UTF-8 even where a str would be smaller (a CJK tail after an emoji): one
    read's join re-decides, `fold` does not."""
    if len(pieces) < 2:
        return
    first = pieces[0]
    if type(first) is bytes:
        pieces[:] = (first + "".join(pieces[1:]).encode(),)  # type: ignore[arg-type]
    else:
        pieces[:] = (compact("".join(pieces)),)  # type: ignore[arg-type]


def compact(text: str) -> Piece:
    """The smaller of `text` and its UTF-8 encoding (short texts stay as they are)."""
    if len(text) < 256 or text.isascii():
        return text
    encoded = text.encode()
    return encoded if sys.getsizeof(encoded) < sys.getsizeof(text) else text

"""What PostgreSQL refuses, escaped reversibly at the storage boundary.

PostgreSQL's `text` cannot hold U+0000 nor bytes that are not UTF-8, `jsonb` refuses the
escape `\\u0000`, and psycopg cannot encode a lone surrogate (Python's `json` decodes one from
`"\\ud800"`). The model fields hand every value through `text_out`/`json_out` on the way in and
`text_in`/`json_in` on the way out, so what a caller stored is what it reads back.

An escaped string starts with U+FDD0, a Unicode noncharacter ("for internal use", never in
interchange text), followed by the string with `\\` doubled, U+0000 as `\\0` and each lone
surrogate as `\\uXXXX`. A string that itself starts with U+FDD0 is escaped too, so the mapping is
one-to-one. Bytes that are not UTF-8 are decoded with `surrogateescape` first: `text_in` then
returns a str whose `.encode("utf-8", "surrogateescape")` gives the original bytes back.

Values needing none of this (all but pathological ones) pass through with one scan for U+0000.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import orjson
import zstandard

MARK = "\ufdd0"
_MARK_UTF8 = MARK.encode()
_ESCAPE = re.compile("[\x00\\\\\ud800-\udfff]")
_UNESCAPE = re.compile(r"\\(\\|0|u[0-9a-f]{4})")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    if char == "\x00":
        return "\\0"
    return f"\\u{ord(char):04x}"


def _unescape_char(match: re.Match[str]) -> str:
    code = match.group(1)
    if code == "\\":
        return "\\"
    if code == "0":
        return "\x00"
    return chr(int(code[1:], 16))


def needs_escape(value: str) -> bool:
    return "\x00" in value or value.startswith(MARK) or _SURROGATE.search(value) is not None


def escape(value: str) -> str:
    return MARK + _ESCAPE.sub(_escape_char, value)


def unescape(value: str) -> str:
    return _UNESCAPE.sub(_unescape_char, value[len(MARK):])


def text_out(value: str | bytes | bytearray) -> str | bytes | bytearray:
    """A text column's value as PostgreSQL takes it: unchanged unless it must be escaped.
    UTF-8 bytes stay bytes (sent as they are); bytes with U+0000 or that are not UTF-8 become
    an escaped str."""
    if isinstance(value, (bytes, bytearray)):
        if b"\x00" not in value and not value.startswith(_MARK_UTF8):
            try:
                value.decode()
            except UnicodeDecodeError:
                pass
            else:
                return value
        return escape(bytes(value).decode("utf-8", "surrogateescape"))
    return escape(value) if needs_escape(value) else value


def text_in(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(MARK):
        return unescape(value)
    return value


def _walk(value: Any, fix: Any) -> Any:
    if isinstance(value, str):
        return fix(value)
    if isinstance(value, list):
        return [_walk(v, fix) for v in value]
    if isinstance(value, dict):
        return {fix(k) if isinstance(k, str) else k: _walk(v, fix) for k, v in value.items()}
    return value


def _escape_if_needed(value: str) -> str:
    return escape(value) if needs_escape(value) else value


def json_out(value: Any) -> Any:
    """A JSON value with every string (keys too) escaped where jsonb or psycopg would refuse it."""
    return _walk(value, _escape_if_needed)


def json_in(value: Any) -> Any:
    return _walk(value, text_in)


def json_bytes_out(raw: bytes) -> bytes:
    """Serialised JSON (orjson's, which never holds a lone surrogate) made safe for jsonb; the
    common case is one scan for `\\u0000` and one for U+FDD0."""
    if b"\\u0000" not in raw and _MARK_UTF8 not in raw:
        return raw
    return orjson.dumps(json_out(orjson.loads(bytes(raw))))  # orjson takes exact bytes only


def json_text_has_escapes(text: str) -> bool:
    """Whether JSON text read back may hold escaped strings (U+FDD0 raw or as `\\ufdd0`)."""
    return MARK in text or "\\ufdd0" in text.lower()


# --- the raw event log, compressed ----------------------------------------------------------------
# zstd at level 3, measured on a 2,000-delta answer in batches of 60 to 130 events (a checkpoint's
# worth): 3.2-3.7x the answer's text (uncompressed: 50x) at 1.3-2.3 us per KB; zlib level 6 gives
# 3.0-3.6x at 5.4-7.7 us per KB, level 9 (3.5-3.0x) 9 us. The writer's database thread does it, and
# zstd releases the GIL while it works. A bytea column takes every byte, so compressed batches need
# none of the text escapes above.
LOG_LEVEL = 3
# One compressor per thread, kept: `zstandard.compress` makes a context per call, which cost
# 24.5 us of a 28 us call on an 11 KB batch (3.7 us reusing one). A compressor is not thread-safe.
_compressors = threading.local()


def log_compress(data: bytes | bytearray) -> bytes:
    compressor = getattr(_compressors, "zstd", None)
    if compressor is None:
        compressor = _compressors.zstd = zstandard.ZstdCompressor(level=LOG_LEVEL)
    return compressor.compress(data)


def log_bytes(data: str | None, compressed: bytes | memoryview | None) -> bytes:
    """A stored batch's exact bytes: the compressed frame if there is one, else the text column."""
    if compressed is not None:
        return zstandard.decompress(bytes(compressed))
    return (data or "").encode("utf-8", "surrogateescape")


def log_text(data: str | None, compressed: bytes | memoryview | None) -> str:
    if compressed is None:
        return data or ""
    return log_bytes(None, compressed).decode("utf-8", "surrogateescape")

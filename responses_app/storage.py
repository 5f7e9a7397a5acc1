"""The storage boundary: what PostgreSQL refuses, escaped reversibly; rows written in bulk; the
raw event log compressed.

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

`insert_rows` writes many rows of a model at once (`COPY ... FROM STDIN` on PostgreSQL, one
multi-row INSERT elsewhere), each value encoded as its field would, and the columns named `json`
taken as JSON already serialised (bytes), escaped here like any other (`json_bytes_out`).
"""

from __future__ import annotations

import re
import threading
from typing import Any, cast

import orjson
import zstandard
from django.db import DEFAULT_DB_ALIAS, connections, models

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
# zstd at level 3: on a checkpoint's worth of events it compresses as well as zlib's higher levels
# in a fraction of the time (bench/README.md, storage). The writer's database thread does it, and
# zstd releases the GIL while it works. A bytea column takes every byte, so compressed batches need
# none of the text escapes above.
LOG_LEVEL = 3
# One compressor per thread, kept: `zstandard.compress` builds a context per call, which costs more
# than compressing the batch (bench/README.md, storage). A compressor is not thread-safe.
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


# --- rows in bulk ----------------------------------------------------------------------------------
# Fields whose adapted value is the Python value itself on PostgreSQL (for the values the writer
# passes: ints, strs, UUIDs, aware datetimes, None): COPY sends them without the field's adapters.
_PLAIN_FIELDS = (models.IntegerField, models.PositiveIntegerField, models.CharField, models.UUIDField,
                 models.DateTimeField)


def insert_rows(model: type[models.Model], rows: list[dict[str, Any]], *, json: frozenset[str] = frozenset()) -> None:
    """Rows of one model (each a dict of the same fields), values adapted by each field as the ORM
    would, except the `json` fields': serialised JSON (bytes) or None. `COPY ... FROM STDIN` on
    PostgreSQL, one multi-row INSERT elsewhere.

    Not `bulk_create`: on PostgreSQL, Django sends it as UNNEST over arrays, and psycopg quotes
    every element of an array of strings in Python, one regex callback per quote character, all of
    it holding the GIL the event loop needs. Not a multi-row INSERT on PostgreSQL either: psycopg
    caches how it parses a statement's parameter markers only up to 50 parameters, and a round's
    INSERT has hundreds; and every value went through its field's adapters. COPY costs the writer
    thread less than either (bench/README.md, writer)."""
    if not rows:
        return
    # This thread's connection itself: through the `connection` proxy every attribute read (one
    # or two per parameter, in the fields' adapters) was a lookup in asgiref's Local.
    db = connections[DEFAULT_DB_ALIAS]
    names = list(rows[0])
    # "request_id" finds the foreign key
    fields = [cast("models.Field[Any, Any]", model._meta.get_field(name)) for name in names]
    columns = ", ".join(db.ops.quote_name(f.column or f.name) for f in fields)
    table = db.ops.quote_name(model._meta.db_table)
    if db.vendor == "postgresql":
        from psycopg.types.json import Jsonb

        def as_jsonb(value: bytes | None, _db: Any) -> Jsonb | None:
            return None if value is None else Jsonb(json_bytes_out(value), dumps=bytes)

        prepared = [(name, as_jsonb if name in json else None
                     if type(f.target_field if isinstance(f, models.ForeignKey) else f) in _PLAIN_FIELDS
                     else f.get_db_prep_save) for name, f in zip(names, fields, strict=True)]
        db.ensure_connection()
        with db.connection.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            write_row = copy.write_row
            for row in rows:
                write_row([row[name] if adapt is None else adapt(row[name], db) for name, adapt in prepared])
        return
    if len(rows) > 2000:  # SQLite takes at most 32,766 parameters per statement
        for start in range(0, len(rows), 2000):
            insert_rows(model, rows[start:start + 2000], json=json)
        return
    row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params = [(None if row[name] is None else bytes(row[name]).decode()) if name in json
              else f.get_db_prep_save(row[name], db) for row in rows for name, f in zip(names, fields, strict=True)]
    with db.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([row_sql] * len(rows)), params)

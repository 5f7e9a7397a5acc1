"""The model fields and index the app defines: JSON written with orjson, UTF-8 text stored as it
arrives, an equality index for a provider's text of any length, and PostgreSQL's search document.
models.py imports each from here; migrations name them by that path."""

from __future__ import annotations

from typing import Any

import orjson
from django.db import models

from . import storage


class Utf8Text(bytes):
    """Text already encoded as UTF-8, for a text column: sent to PostgreSQL as it is."""


def _register_utf8_text_dumper() -> None:
    try:
        import psycopg
        from psycopg.adapt import Dumper
    except ImportError:  # SQLite only: Utf8TextField decodes instead
        return

    class Utf8TextDumper(Dumper):
        oid = psycopg.adapters.types["text"].oid

        def dump(self, obj: Any) -> bytes:
            return bytes(obj)

    psycopg.adapters.register_dumper(Utf8Text, Utf8TextDumper)


_register_utf8_text_dumper()


class FastJSONField(models.JSONField):  # type: ignore[type-arg]
    """A JSONField written with orjson: the standard library's encoder holds the GIL for many times
    longer on the same value (checkpoint rows in bulk are serialised by the core and written by
    storage.insert_rows). On PostgreSQL, strings jsonb refuses (U+0000, lone surrogates) are
    escaped reversibly (storage.py) and unescaped when read."""

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        postgresql = connection.vendor == "postgresql"
        if not prepared:
            value = self.get_prep_value(value)
        if isinstance(value, (dict, list)):
            try:
                text = orjson.dumps(value).decode()
            except TypeError:  # what orjson refuses (non-string keys, lone surrogates ...)
                if postgresql:
                    value = storage.json_out(value)
                return super().get_db_prep_value(value, connection, prepared=True)
            if postgresql:
                from psycopg.types.json import Jsonb

                if "\\u0000" in text or storage.MARK in text:
                    text = orjson.dumps(storage.json_out(value)).decode()
                return Jsonb(value, dumps=lambda _obj: text)
            return text
        if postgresql and isinstance(value, str):
            value = storage.json_out(value)
        return super().get_db_prep_value(value, connection, prepared=True)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        decoded = super().from_db_value(value, expression, connection)
        if isinstance(value, str) and storage.json_text_has_escapes(value):
            return storage.json_in(decoded)
        return decoded


class Utf8TextField(models.TextField):  # type: ignore[type-arg]
    """A TextField that also takes UTF-8 bytes. On PostgreSQL they go over the wire unchanged;
    decoded to a str first, text with one emoji in it would take 4 bytes per character. What
    PostgreSQL's text refuses (U+0000, bytes that are not UTF-8, lone surrogates) is escaped
    reversibly (storage.py) and unescaped when read."""

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if isinstance(value, (bytes, bytearray)):
            if connection.vendor == "postgresql":
                safe = storage.text_out(value)
                return Utf8Text(safe) if isinstance(safe, (bytes, bytearray)) else safe
            return bytes(value).decode("utf-8", "replace")
        value = super().get_db_prep_value(value, connection, prepared)
        if isinstance(value, str) and connection.vendor == "postgresql":
            return storage.text_out(value)
        return value

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return storage.text_in(value)


class EqualityIndex(models.Index):
    """For `column = value` lookups of a provider's text of any length: a hash index on PostgreSQL
    (a btree entry has a size limit of a few kilobytes), a plain one elsewhere. Provider fields (ids, names,
    codes) are text columns, so no provider can make a write fail (LiteLLM's ids: 441 characters);
    in a unique constraint, such a field is compared by its MD5."""

    def create_sql(self, model: Any, schema_editor: Any, using: str = "", **kwargs: Any) -> Any:
        if schema_editor.connection.vendor == "postgresql":
            using = " USING hash"
        return super().create_sql(model, schema_editor, using=using, **kwargs)


class SearchDocumentField(models.Field):  # type: ignore[type-arg]
    """A full-text search document: tsvector on PostgreSQL (text elsewhere, where nothing writes it).
    Not django.contrib.postgres's SearchVectorField, whose import needs psycopg: a host on SQLite
    imports this app without it. search.py queries it with `@@` in SQL and ranks it with SearchRank."""

    description = "A full-text search document"

    def db_type(self, connection: Any) -> str:
        return "tsvector" if connection.vendor == "postgresql" else "text"

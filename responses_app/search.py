"""Search across one's own conversations (reads). Over each turn's prompt, its answer (the final
text shown) and what its tool calls said (`tool_document`: each call's name, arguments, queries
and output, stored as the turn ends), and a conversation's title for its first turn (not every
turn of a conversation whose title matches); only the user's own turns, never a deleted
conversation, and an archived one's only when asked (`archived`: the sidebar hides them, so does
search by default; each hit says whether its conversation is archived).

On PostgreSQL: full-text search (RELAY_SEARCH_CONFIG; `websearch_to_tsquery`, so words,
"a phrase", -not and `or` work as people type them), ranked, with `ts_headline` excerpts. Each
turn's document is stored (`SearchDocument`, GIN-indexed): written when the turn is created,
again once when its answer ends (services.request_mark_terminal, after the final text is stored;
never while it streams) and when its conversation is renamed; a query reads the index, never the
texts. A document holds the first PROMPT_CHARS of the prompt and
ANSWER_CHARS of the answer (PostgreSQL's tsvector holds at most 1 MB). On another database
(SQLite): every word must appear as written, case-insensitively (`icontains`), newest first.
Either way a hit names its turn, so a link opens it (web/versions.version_link); queries are capped
(MAX_QUERY_CHARS, MAX_RESULTS) and rate limited per user (RELAY_SEARCH_RATE, web/search_export.py).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.db import connection, transaction
from django.db.models import F, Func, Q, QuerySet, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Left
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from .conf import app_settings
from .models import Conversation, ResponseRequest, SearchDocument

MAX_RESULTS = 50
MAX_QUERY_CHARS = 200
MAX_WORDS = 8  # the plain search: one LIKE per word and field
EXCERPT_CHARS = 90  # either side of the first match (the plain search)
_START, _STOP = "\ue000", "\ue001"  # ts_headline's marks, made <mark> once the text is escaped
PROMPT_CHARS = 50_000  # of a turn's prompt (its text, or its items' JSON), searched and excerpted
ANSWER_CHARS = 100_000  # of its answer: with the prompt's, well under a tsvector's 1 MB at any text
TOOL_CHARS = 50_000  # of what its tool calls said (stored whole up to this)
_TOOL_FIELDS = ("arguments", "input", "query", "queries", "commands", "output", "outputs", "result", "error")
_TABLE, _CONVERSATIONS = ResponseRequest._meta.db_table, Conversation._meta.db_table
_DOCUMENTS = SearchDocument._meta.db_table
# One document per turn (so "spring -windows" sees all of it): a first turn's has the title too.
DOCUMENT = (
    f"setweight(to_tsvector(%(config)s::regconfig, left(coalesce(r.input #>> '{{}}', ''), {PROMPT_CHARS})), 'A')"
    f" || setweight(to_tsvector(%(config)s::regconfig, left(r.final_text, {ANSWER_CHARS})), 'B')"
    f" || setweight(to_tsvector(%(config)s::regconfig, left(r.tool_text, {TOOL_CHARS})), 'C')"
    f" || CASE WHEN r.parent_id IS NULL THEN setweight(to_tsvector(%(config)s::regconfig, coalesce(("
    f'SELECT c.title FROM "{_CONVERSATIONS}" c WHERE c.id = r.conversation_id), \'\')), \'A\')'
    " ELSE ''::tsvector END")
_UPSERT = (f'INSERT INTO "{_DOCUMENTS}" (request_id, vector) SELECT r.id, {DOCUMENT} FROM "{_TABLE}" r '
           "WHERE r.id = ANY(%(ids)s) ON CONFLICT (request_id) DO UPDATE SET vector = EXCLUDED.vector")


@dataclass(frozen=True, slots=True)
class Hit:
    request_id: uuid.UUID
    conversation_id: uuid.UUID
    title: str
    created: datetime
    prompt: SafeString  # an excerpt, the words found in <mark>
    answer: SafeString
    tools: SafeString = mark_safe("")  # noqa: S308 - empty; an excerpt of what its tool calls said, when found there
    archived: bool = False  # its conversation is archived (found only when the search includes them)


def tool_document(blocks: Iterable[dict[str, Any]]) -> str:
    """What a turn's tool calls said, as searched: a line per call, its name then each field."""
    lines = []
    for block in blocks:
        if block.get("kind") != "tool":
            continue
        parts = [str(block.get("name") or block.get("tool") or "")]
        for field in _TOOL_FIELDS:
            value = block.get(field)
            if value not in (None, "", [], {}):
                parts.append(value if isinstance(value, str) else orjson.dumps(value).decode())
        lines.append(" ".join(p for p in parts if p))
    return "\n".join(lines)[:TOOL_CHARS]


def index(turns: QuerySet[ResponseRequest] | list[uuid.UUID]) -> None:
    """Write the search documents of these turns (PostgreSQL; nothing elsewhere): a new turn, one
    whose answer was just stored, a renamed conversation's first turns. One statement; the
    texts are read where they are stored, never sent again."""
    if connection.vendor != "postgresql":
        return
    ids = list(turns) if isinstance(turns, list) else list(turns.values_list("pk", flat=True))
    if ids:
        with connection.cursor() as cursor:
            cursor.execute(_UPSERT, {"config": app_settings.SEARCH_CONFIG, "ids": ids})


def search_turns(*, user: Any, query: str, limit: int = MAX_RESULTS, archived: bool = False) -> list[Hit]:
    """The user's turns that match, archived conversations' too with `archived`."""
    query = " ".join(query.split())[:MAX_QUERY_CHARS]
    limit = min(limit, MAX_RESULTS)
    if not query or not user.is_authenticated or "\x00" in query:  # no database takes U+0000
        return []
    if connection.vendor == "postgresql":
        with _index_paths():
            rows = list(_full_text(_turns(user, archived), query)[:limit])
        return _in_turns([Hit(pk, conversation_id, title or "", created, _marked(prompt or ""), _marked(answer or ""),
                              _marked(tools or "") if _START in (tools or "") else mark_safe(""),  # noqa: S308
                              archived_at is not None)
                          for pk, conversation_id, title, created, prompt, answer, tools, archived_at in rows], query)
    return _in_turns(_plain(_turns(user, archived), query, limit), query)


def _in_turns(hits: list[Hit], query: str) -> list[Hit]:
    """A hit on any part of a continued answer (continuing.py) is a hit on its turn, once: named
    by its first part (the link opens the turn), with that part's prompt and the answer's parts
    joined, excerpted around the words found."""
    ids = {hit.request_id for hit in hits}
    rows = ResponseRequest.objects.filter(Q(pk__in=ids) | Q(continues__isnull=False, conversation__in={
        hit.conversation_id for hit in hits})).values_list("pk", "continues_id", "parent_id")
    up = {pk: continued for pk, continued, parent in rows if continued is not None and continued == parent}
    if not up:
        return hits
    down = {continued: pk for pk, continued in up.items()}
    groups: dict[uuid.UUID, list[uuid.UUID]] = {}
    for pk in ids:
        head = pk
        while head in up:
            head = up[head]
        part, parts = head, [head]
        while part in down:
            part = down[part]
            parts.append(part)
        groups[pk] = parts
    texts = dict(ResponseRequest.objects.filter(pk__in={p for parts in groups.values() for p in parts})
                 .values_list("pk", "final_text"))
    heads = ResponseRequest.objects.in_bulk({parts[0] for parts in groups.values()})
    words, seen, out = _words(query), set(), []
    for hit in hits:
        parts = groups[hit.request_id]
        if len(parts) == 1:
            out.append(hit)
        elif parts[0] not in seen and parts[0] in heads:
            first = heads[parts[0]]
            out.append(Hit(first.pk, hit.conversation_id, hit.title, first.created, excerpt(first.prompt_text, words),
                           excerpt("".join(texts.get(p, "") for p in parts), words), hit.tools, hit.archived))
        seen.add(parts[0])
    return out


def explain(*, user: Any, query: str, archived: bool = False) -> str:
    """PostgreSQL's plan of a search, as `search_turns` runs it."""
    with _index_paths():
        return _full_text(_turns(user, archived), " ".join(query.split())[:MAX_QUERY_CHARS])[:MAX_RESULTS].explain()


def _turns(user: Any, archived: bool) -> QuerySet[ResponseRequest]:
    turns = ResponseRequest.objects.filter(owner=user, conversation__owner=user, conversation__deleted_at__isnull=True)
    return turns if archived else turns.filter(conversation__archived_at__isnull=True)


@contextmanager
def _index_paths() -> Iterator[None]:
    """The documents are stored out of line (TOAST): a sequential scan looks cheap to the planner
    and reads every one of them. Index paths only (the GIN index, or the owner's turns first when
    the words are common), for this query alone."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        try:
            yield
        finally:
            cursor.execute("RESET enable_seqscan")


def _marked(text: str) -> SafeString:
    return mark_safe(escape(text).replace(_START, "<mark>").replace(_STOP, "</mark>"))  # noqa: S308 - escaped


def _full_text(turns: QuerySet[ResponseRequest], query: str) -> QuerySet[Any]:
    from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchRank

    config = app_settings.SEARCH_CONFIG
    prompt = Func(F("input"), template="(%(expressions)s #>> '{}')", output_field=TextField())  # a string's text
    words = SearchQuery(query, search_type="websearch", config=config)
    marks: dict[str, Any] = {"config": config, "start_sel": _START, "stop_sel": _STOP, "max_words": 30,
                             "min_words": 12, "short_word": 2, "highlight_all": False}
    # The turns whose documents match, from the GIN index alone (OFFSET 0: planned on its own, so
    # no plan reads a user's every document first); only they are ranked and excerpted.
    matching = RawSQL(f'SELECT request_id FROM "{_DOCUMENTS}" WHERE vector @@ websearch_to_tsquery(%s::regconfig, %s) '
                      "OFFSET 0", [config, query])
    return (turns.filter(pk__in=matching)
            .annotate(rank=SearchRank(F("search_document__vector"), words),
                      prompt_excerpt=SearchHeadline(Left(prompt, PROMPT_CHARS), words, **marks),
                      answer_excerpt=SearchHeadline(Left("final_text", ANSWER_CHARS), words, **marks),
                      tools_excerpt=SearchHeadline(Left("tool_text", TOOL_CHARS), words, **marks))
            .order_by("-rank", "-created")
            .values_list("pk", "conversation_id", "conversation__title", "created", "prompt_excerpt",
                         "answer_excerpt", "tools_excerpt", "conversation__archived_at"))


def _words(query: str) -> list[str]:
    words = [w.strip('"') for w in query.split() if not w.startswith("-")]  # -word: only the full-text search
    return [w for w in words if w and w.lower() != "or"][:MAX_WORDS]


def _plain(turns: QuerySet[ResponseRequest], query: str, limit: int) -> list[Hit]:
    words = _words(query)
    if not words:
        return []
    every = Q()
    for word in words:
        every &= (Q(final_text__icontains=word) | Q(input__icontains=word) | Q(tool_text__icontains=word)
                  | Q(conversation__title__icontains=word, parent__isnull=True))
    rows = turns.filter(every).select_related("conversation").order_by("-created")[:limit]
    return [Hit(r.pk, r.conversation_id, r.conversation.title if r.conversation else "", r.created,  # type: ignore[arg-type]
                excerpt(r.prompt_text, words), excerpt(r.final_text, words), _found_in(r.tool_text, words),
                r.conversation is not None and r.conversation.archived_at is not None)
            for r in rows]


def _found_in(text: str, words: list[str]) -> SafeString:
    """An excerpt of `text` when a word is found there, else nothing."""
    folded = text.casefold()
    return excerpt(text, words) if any(w.casefold() in folded for w in words) else mark_safe("")  # noqa: S308


def excerpt(text: str, words: list[str]) -> SafeString:
    """Around the first word found (the start when none is), each word found marked."""
    text = " ".join((text or "").split())
    pattern = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)), re.IGNORECASE)
    found = pattern.search(text)
    start = max(0, found.start() - EXCERPT_CHARS) if found else 0
    end = min(len(text), (found.end() if found else 0) + EXCERPT_CHARS)
    window = text[start:end]
    parts: list[str] = []
    last = 0
    for match in pattern.finditer(window):
        parts.append(escape(window[last:match.start()]))
        parts.append(f"<mark>{escape(match.group(0))}</mark>")
        last = match.end()
    parts.append(escape(window[last:]))
    return mark_safe(("…" if start else "") + "".join(parts) + ("…" if end < len(text) else ""))  # noqa: S308

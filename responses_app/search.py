"""Search across one's own conversations (reads). Over each turn's prompt and its answer (the final
text shown), and a conversation's title for its first turn (not every turn of a conversation
whose title matches); only the user's own turns, never a deleted conversation.

On PostgreSQL: full-text search (RELAY_SEARCH_CONFIG; `websearch_to_tsquery`, so words,
"a phrase", -not and `or` work as people type them), ranked, with `ts_headline` excerpts. On
another database (SQLite): every word must appear as written, case-insensitively (`icontains`),
newest first. Either way a hit names its turn, so a link opens it (branch_views.chat_show).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Case, F, Func, Q, QuerySet, TextField, When
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from .conf import app_settings
from .models import ResponseRequest

MAX_RESULTS = 50
MAX_QUERY_CHARS = 200
MAX_WORDS = 8  # the plain search: one LIKE per word and field
EXCERPT_CHARS = 90  # either side of the first match (the plain search)
_START, _STOP = "\ue000", "\ue001"  # ts_headline's marks, made <mark> once the text is escaped


@dataclass(frozen=True, slots=True)
class Hit:
    request_id: uuid.UUID
    conversation_id: uuid.UUID
    title: str
    created: datetime
    prompt: SafeString  # an excerpt, the words found in <mark>
    answer: SafeString


def search_turns(*, user: Any, query: str, limit: int = MAX_RESULTS) -> list[Hit]:
    query = " ".join(query.split())[:MAX_QUERY_CHARS]
    if not query or not user.is_authenticated:
        return []
    turns = ResponseRequest.objects.filter(owner=user, conversation__owner=user,
                                           conversation__deleted_at__isnull=True)
    if connection.vendor == "postgresql":
        return _full_text(turns, query, limit)
    return _plain(turns, query, limit)


def _marked(text: str) -> SafeString:
    return mark_safe(escape(text).replace(_START, "<mark>").replace(_STOP, "</mark>"))  # noqa: S308 - escaped


def _full_text(turns: QuerySet[ResponseRequest], query: str, limit: int) -> list[Hit]:
    from django.contrib.postgres.search import (
        SearchHeadline,
        SearchQuery,
        SearchRank,
        SearchVector,
        SearchVectorField,
    )

    config = app_settings.SEARCH_CONFIG
    prompt = Func(F("input"), template="(%(expressions)s #>> '{}')", output_field=TextField())  # a string's text
    text = SearchVector(prompt, weight="A", config=config) + SearchVector("final_text", weight="B", config=config)
    title = SearchVector("conversation__title", weight="A", config=config)
    # One document per turn (so "spring -windows" sees all of it): a first turn's has the title too.
    document = Case(When(parent__isnull=True, then=text + title), default=text, output_field=SearchVectorField())
    words = SearchQuery(query, search_type="websearch", config=config)
    marks: dict[str, Any] = {"config": config, "start_sel": _START, "stop_sel": _STOP, "max_words": 30,
                             "min_words": 12, "short_word": 2, "highlight_all": False}
    rows = (turns.annotate(document=document).filter(document=words)
            .annotate(rank=SearchRank(F("document"), words),
                      prompt_excerpt=SearchHeadline(prompt, words, **marks),
                      answer_excerpt=SearchHeadline("final_text", words, **marks))
            .order_by("-rank", "-created")
            .values_list("pk", "conversation_id", "conversation__title", "created", "prompt_excerpt",
                         "answer_excerpt")[:limit])
    return [Hit(pk, conversation_id, title or "", created, _marked(prompt_text or ""), _marked(answer or ""))
            for pk, conversation_id, title, created, prompt_text, answer in rows]


def _words(query: str) -> list[str]:
    words = [w.strip('"') for w in query.split() if not w.startswith("-")]  # -word: only the full-text search
    return [w for w in words if w and w.lower() != "or"][:MAX_WORDS]


def _plain(turns: QuerySet[ResponseRequest], query: str, limit: int) -> list[Hit]:
    words = _words(query)
    if not words:
        return []
    every = Q()
    for word in words:
        every &= (Q(final_text__icontains=word) | Q(input__icontains=word)
                  | Q(conversation__title__icontains=word, parent__isnull=True))
    rows = turns.filter(every).select_related("conversation").order_by("-created")[:limit]
    return [Hit(r.pk, r.conversation_id, r.conversation.title if r.conversation else "", r.created,  # type: ignore[arg-type]
                excerpt(r.prompt_text, words), excerpt(r.final_text, words)) for r in rows]


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

"""The conversation search on PostgreSQL over many megabytes of one user's turns: the query as it
was (every turn's document computed per query) beside the stored, GIN-indexed documents, and what
writing one document costs as an answer ends.

    python -m bench search [--mb 20] [--answer-chars 10000]

A temporary PostgreSQL database (dropped afterwards); one user holds `--mb` MB of answers of
`--answer-chars` characters (words drawn from a Zipf-like vocabulary, seeded), one of them naming
a rare word. Each query runs 3 times; the median is shown.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.harness import base_env, database, migrate

RARE = "okavango"


def _vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)]


def _timed(call: Callable[[], Any], rounds: int = 3) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def _before(user: Any, query: str) -> list[Any]:
    """The query as it was: each turn's document computed per query."""
    from django.contrib.postgres.search import (
        SearchHeadline,
        SearchQuery,
        SearchRank,
        SearchVector,
        SearchVectorField,
    )
    from django.db.models import Case, F, Func, TextField, When

    from responses_app.conf import app_settings
    from responses_app.models import ResponseRequest

    config = app_settings.SEARCH_CONFIG
    prompt = Func(F("input"), template="(%(expressions)s #>> '{}')", output_field=TextField())
    text = SearchVector(prompt, weight="A", config=config) + SearchVector("final_text", weight="B", config=config)
    title = SearchVector("conversation__title", weight="A", config=config)
    document = Case(When(parent__isnull=True, then=text + title), default=text, output_field=SearchVectorField())
    words = SearchQuery(query, search_type="websearch", config=config)
    turns = ResponseRequest.objects.filter(owner=user, conversation__owner=user, conversation__deleted_at__isnull=True)
    return list(turns.annotate(document=document).filter(document=words)
                .annotate(rank=SearchRank(F("document"), words),
                          p=SearchHeadline(prompt, words, config=config), a=SearchHeadline("final_text", words,
                                                                                           config=config))
                .order_by("-rank", "-created").values_list("pk", "p", "a")[:50])


def run(mb: int, answer_chars: int) -> list[str]:
    from django.contrib.auth import get_user_model

    from responses_app import search, services
    from responses_app.models import ResponseRequest

    rng = random.Random(7)
    vocabulary = _vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    user = get_user_model().objects.create_user("searcher", password="pw")
    conversation = services.conversation_create(owner=user, title="Notes")
    count = mb * 1_000_000 // answer_chars

    def answer() -> str:
        words = rng.choices(vocabulary, weights, k=answer_chars // 6)
        return " ".join(words)[:answer_chars]

    rows = [ResponseRequest(owner=user, conversation=conversation, client_request_id=f"t{i}", model="sim-text",
                            input=f"question {i}", status="completed", final_text=answer()) for i in range(count)]
    rows[count // 2].final_text += f" {RARE}"
    started = time.perf_counter()
    ResponseRequest.objects.bulk_create(rows, batch_size=200)
    search.index(ResponseRequest.objects.filter(owner=user))
    loaded = time.perf_counter() - started
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE responses_app_responserequest")
        cursor.execute("VACUUM ANALYZE responses_app_searchdocument")
    common = vocabulary[0]
    lines = [f"{count} turns of {answer_chars:,} characters ({mb} MB of answers) of one user, loaded and indexed "
             f"in {loaded:.1f} s", "", "| query | before (computed per query) | after (stored, GIN) | hits |",
             "|---|---|---|---|"]
    for label, query in ((f"a rare word ({RARE}, 1 turn)", RARE), ("the commonest word (in every turn)", common),
                         (f"two words ({RARE} {common})", f"{RARE} {common}")):
        before, found_before = _timed(lambda q=query: _before(user, q))  # type: ignore[misc]
        after, found = _timed(lambda q=query: search.search_turns(user=user, query=q))  # type: ignore[misc]
        assert [h.request_id for h in found] == [pk for pk, *_ in found_before], label
        lines.append(f"| {label} | {before * 1000:,.0f} ms | {after * 1000:,.1f} ms | {len(found)} |")
    plan = search.explain(user=user, query=RARE)
    used = "GIN index (search_document_vector)" if "search_document_vector" in plan else plan
    lines += ["", f"plan of the rare word: {used}",
              "", "| an answer's document written as it ends | median of 5 |", "|---|---|"]
    for chars in (1_000, 10_000, 100_000, 1_000_000):
        request, _ = services.request_create(owner=user, input="One more", model="sim-text",
                                             client_request_id=f"end-{chars}", conversation=conversation)
        text = (answer() * (chars // answer_chars + 1))[:chars]
        ResponseRequest.objects.filter(pk=request.pk).update(final_text=text)
        cost, _ = _timed(lambda pk=request.pk: search.index([pk]), rounds=5)  # type: ignore[misc]
        lines.append(f"| {chars:,} characters | {cost * 1000:.1f} ms |")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench search", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--answer-chars", type=int, default=10_000)
    args = parser.parse_args(argv)
    with database(True) as (url, description):
        env = base_env(DJANGO_ENV="development", DATABASE_URL=url, REDIS_URL="")
        migrate(env)
        os.environ.update({"DJANGO_ENV": "development", "DATABASE_URL": url, "REDIS_URL": ""})
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
        import django

        django.setup()
        lines = run(args.mb, args.answer_chars)
        from django.db import connections

        connections.close_all()
    print(f"{description}\n")
    print("\n".join(lines))
    return 0

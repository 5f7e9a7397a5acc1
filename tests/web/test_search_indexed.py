"""Search costs are bounded: on PostgreSQL each turn's document is stored and GIN-indexed (the
query plan reads the index, a search over megabytes of one user's turns stays fast, an answer
too big for one tsvector is still searchable), searches are rate limited per user (429 with
Retry-After) and capped, and a query holding U+0000 is a 400, never a 500. Run on PostgreSQL
(DATABASE_URL=postgres://...) for the full set; the rate limit and U+0000 run on SQLite too."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from responses_app import search, services
from responses_app.models import ResponseRequest, SearchDocument
from tests.web.test_pages import client_for
from tests.web.test_search_export import answered, hits

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]
postgresql_only = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the index: PostgreSQL")


def many_turns(owner: Any, count: int, chars: int) -> None:
    """`count` finished turns of `chars` characters of varied words each, in one conversation,
    written in bulk and then given their documents as the app writes them."""
    conversation = services.conversation_create(owner=owner, title="Bulk")
    rows = [ResponseRequest(owner=owner, conversation=conversation, client_request_id=f"bulk-{i}", model="sim-text",
                            input=f"question {i} about rivers", status="completed",
                            final_text=" ".join(f"w{(i * 7919 + j * 104729) % 50021}x" for j in range(chars // 8)))
            for i in range(count)]
    ResponseRequest.objects.bulk_create(rows, batch_size=200)
    search.index(ResponseRequest.objects.filter(conversation=conversation))
    with connection.cursor() as cursor:
        cursor.execute(f'ANALYZE "{ResponseRequest._meta.db_table}"')
        cursor.execute(f'ANALYZE "{SearchDocument._meta.db_table}"')


@postgresql_only
def test_the_query_plan_reads_the_gin_index(owner: Any) -> None:
    many_turns(owner, 400, 2000)
    answered(owner, "Tell me about the Danube", "The Danube flows through ten countries.")
    assert len(hits(owner, "danube")) == 1
    plan = search.explain(user=owner, query="danube")
    assert "search_document_vector" in plan, plan
    assert "to_tsvector" not in plan, "no document is computed per query"


@postgresql_only
def test_a_search_over_megabytes_of_turns_stays_fast(owner: Any) -> None:
    many_turns(owner, 500, 10_000)  # 5 MB of one user's answers
    needle = answered(owner, "Where is the Okavango delta?", "In Botswana.")
    started = time.perf_counter()
    for _ in range(3):
        assert [h.request_id for h in hits(owner, "okavango")] == [needle.pk]
    one = (time.perf_counter() - started) / 3
    assert one < 0.25, f"a search took {one:.3f} s"
    common = hits(owner, "rivers")  # in every turn: ranked, capped
    assert len(common) == search.MAX_RESULTS


@postgresql_only
def test_an_answer_too_big_for_one_tsvector_ends_and_is_found(owner: Any) -> None:
    huge = " ".join(f"u{n}q" for n in range(400_000))  # 3 MB of distinct words: no tsvector holds them all
    turn = answered(owner, "Count for me", huge)
    assert ResponseRequest.objects.get(pk=turn.pk).status == "completed", "stored whatever its size"
    assert [h.request_id for h in hits(owner, "u17q")] == [turn.pk], "its beginning is searchable"


@postgresql_only
def test_a_renamed_conversation_is_found_by_its_new_title(owner: Any) -> None:
    first = answered(owner, "Hello", "Hi.", title="Old name")
    answered(owner, "More", "Sure.", conversation=first.conversation)
    services.conversation_rename(conversation=first.conversation, title="Zambezi trip")  # type: ignore[arg-type]
    assert [h.request_id for h in hits(owner, "zambezi")] == [first.pk], "its first turn, not every turn"
    assert hits(owner, "old name") == []


@postgresql_only
def test_a_streaming_turn_is_found_by_its_prompt_and_after_by_its_answer(owner: Any) -> None:
    conversation = services.conversation_create(owner=owner)
    request, _ = services.request_create(owner=owner, input="Explain the Limpopo", model="sim-text",
                                         client_request_id=str(uuid.uuid4()), conversation=conversation)
    assert [h.request_id for h in hits(owner, "limpopo")] == [request.pk]
    assert hits(owner, "crocodiles") == []
    services.request_mark_terminal(request_id=request.pk, token=None, status="completed", at=timezone.now(),
                                   final_text="It has crocodiles.")
    assert [h.request_id for h in hits(owner, "crocodiles")] == [request.pk]


def test_a_nul_in_the_query_is_a_400_that_says_so(owner: Any) -> None:
    answered(owner, "Nile", "The Nile.")
    client = client_for(owner, raise_request_exception=False)
    for query in ("\x00", "nile\x00", "a\x00b c"):
        response = client.get(reverse("responses_app:search"), {"q": query})
        assert response.status_code == 400, (query, response.status_code)
        assert "U+0000" in response.content.decode()
    assert search.search_turns(user=owner, query="nile\x00") == []


def test_searches_are_rate_limited_per_user(owner: Any, teammate: Any, settings: Any) -> None:
    settings.RELAY_SEARCH_RATE = "3/h"
    answered(owner, "Nile", "The Nile.")
    client = client_for(owner)
    url = reverse("responses_app:search")
    assert [client.get(url, {"q": "nile"}).status_code for _ in range(3)] == [200, 200, 200]
    refused = client.get(url, {"q": "nile"})
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 3600
    assert "Too many searches: at most 3 per hour" in refused.content.decode()
    assert client.get(url).status_code == 200, "the empty search page is not a search"
    assert client_for(teammate).get(url, {"q": "nile"}).status_code == 200, "per user"


def test_results_and_query_are_capped(owner: Any) -> None:
    for i in range(search.MAX_RESULTS + 5):
        answered(owner, f"Rhine {i}", "The Rhine.")
    assert len(search.search_turns(user=owner, query="rhine", limit=10_000)) == search.MAX_RESULTS
    long_query = "rhine " + "x" * 10_000
    assert len(search.search_turns(user=owner, query=long_query)) in (0, search.MAX_RESULTS)

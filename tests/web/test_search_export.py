"""Find and take out: search across one's own conversations (PostgreSQL full-text search, a plain
`icontains` on SQLite; run this file on both), results that open the turn on its branch, and
exports of the branch shown as Markdown and JSON, never another user's. Personas: the owner, a
teammate, staff."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from responses_app import conversation_lists, search, services
from responses_app.models import Conversation, ResponseRequest
from tests.web.test_pages import client_for, make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]

postgresql_only = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="full-text search: PostgreSQL")
sqlite_only = pytest.mark.skipif("connection.vendor != 'sqlite'", reason="the plain search: SQLite")


def answered(owner: Any, prompt: str, answer: str, conversation: Conversation | None = None,
             title: str = "") -> ResponseRequest:
    conversation = conversation or services.conversation_create(owner=owner, title=title)
    request, _ = services.request_create(owner=owner, input=prompt, model="sim-text",
                                         client_request_id=str(uuid.uuid4()), conversation=conversation)
    assert services.request_mark_terminal(request_id=request.pk, token=None, status="completed", at=timezone.now(),
                                          final_text=answer, response_id=f"resp_{uuid.uuid4().hex[:8]}")
    request.refresh_from_db()
    return request


def hits(user: Any, query: str) -> list[search.Hit]:
    return search.search_turns(user=user, query=query)


# --- search ---------------------------------------------------------------------------------------------

def test_search_finds_one_s_own_turns_by_prompt_answer_or_title(owner: Any, teammate: Any) -> None:
    rivers = answered(owner, "Tell me about the Danube", "The Danube flows through ten countries.")
    lakes = answered(owner, "And lakes?", "Baikal is the deepest lake.", title="Freshwater notes")
    answered(teammate, "Danube please", "The Danube, for the teammate.")
    assert [h.request_id for h in hits(owner, "danube")] == [rivers.pk], "never another user's"
    assert [h.request_id for h in hits(owner, "Baikal")] == [lakes.pk]
    assert [h.request_id for h in hits(owner, "freshwater")] == [lakes.pk], "by the conversation's title"
    answered(owner, "More?", "Some more.", conversation=lakes.conversation)
    assert [h.request_id for h in hits(owner, "freshwater")] == [lakes.pk], "its first turn, not every turn"
    found = hits(owner, "danube")[0]
    assert "<mark>Danube</mark>" in found.prompt + found.answer
    assert hits(owner, "") == [] and hits(owner, "   ") == []
    assert hits(owner, "zanzibar") == []


def test_search_finds_a_turn_by_what_its_tool_calls_said(owner: Any) -> None:
    weather = answered(owner, "Weather in the capital?", "It is mild.")
    tool_text = search.tool_document([
        {"id": "o0", "kind": "tool", "tool": "function_call", "name": "get_weather",
         "arguments": '{"location": "Reykjavik"}', "output": '{"temperature": 4, "conditions": "sleet"}'},
        {"id": "o1-c0", "kind": "text", "text": "not a tool"},
        {"id": "o2", "kind": "tool", "tool": "web_search_call", "queries": ["geysir eruption times"]}])
    assert tool_text == ('get_weather {"location": "Reykjavik"} {"temperature": 4, "conditions": "sleet"}\n'
                         'web_search_call ["geysir eruption times"]')
    ResponseRequest.objects.filter(pk=weather.pk).update(tool_text=tool_text)
    search.index([weather.pk])
    answered(owner, "Something else", "Nothing about that.")
    for query in ("reykjavik", "sleet", "geysir"):
        found = hits(owner, query)
        assert [h.request_id for h in found] == [weather.pk], query
        assert "<mark>" in found[0].tools and query in found[0].tools.lower()
    assert hits(owner, "mild")[0].tools == "", "no tool excerpt when the words are elsewhere"
    html = client_for(owner).get(reverse("responses_app:search"), {"q": "sleet"}).content.decode()
    assert "data-hit-tools" in html and "<mark>sleet</mark>" in html


def test_search_leaves_deleted_conversations_out(owner: Any) -> None:
    kept = answered(owner, "Volga", "The Volga is long.")
    gone = answered(owner, "Volga again", "The Volga, deleted.")
    services.conversation_delete(conversation=gone.conversation)  # type: ignore[arg-type]
    assert [h.request_id for h in hits(owner, "volga")] == [kept.pk]


def test_search_leaves_archived_conversations_out_unless_asked(owner: Any, teammate: Any) -> None:
    kept = answered(owner, "Loire castles", "The Loire has many.")
    shelved = answered(owner, "Loire wines", "Sancerre, on the Loire.")
    theirs = answered(teammate, "Loire for the teammate", "Their Loire.")
    for turn in (shelved, theirs):
        assert turn.conversation is not None
        conversation_lists.set_mark(conversation=turn.conversation, mark="archived", on=True)
    assert [(h.request_id, h.archived) for h in hits(owner, "loire")] == [(kept.pk, False)]
    found = search.search_turns(user=owner, query="loire", archived=True)
    assert sorted((h.request_id, h.archived) for h in found) == sorted([(kept.pk, False), (shelved.pk, True)])
    assert theirs.pk not in {h.request_id for h in found}, "another user's archived turns: never"
    assert [h.request_id for h in search.search_turns(user=teammate, query="loire")] == []
    assert [h.request_id for h in search.search_turns(user=teammate, query="loire", archived=True)] == [theirs.pk]


def test_the_search_page_keeps_include_archived_and_marks_archived_hits(owner: Any) -> None:
    answered(owner, "Seine bridges", "Thirty-seven of them.")
    shelved = answered(owner, "Seine islands", "Two, in Paris.")
    assert shelved.conversation is not None
    conversation_lists.set_mark(conversation=shelved.conversation, mark="archived", on=True)
    client = client_for(owner)
    default = client.get(reverse("responses_app:search"), {"q": "seine"}).content.decode()
    assert "1 turn found" in default and "data-hit-archived" not in default
    assert re.search(r'<input type="checkbox" name="archived" value="1" data-search-archived>', default)
    assert re.search(r'<label class="search-archived[^"]*"><input [^>]*name="archived"[^>]*> Include archived</label>',
                     default), "the box is labelled"
    both = client.get(reverse("responses_app:search"), {"q": "seine", "archived": "1"}).content.decode()
    assert "2 turns found" in both
    assert re.search(r'name="archived" value="1" checked data-search-archived', both), "kept in the form"
    hit = re.search(rf'<li class="search-hit" data-request-id="{shelved.pk}".*?</li>', both, re.S)
    assert hit and re.search(r'<span class="hit-title">[^<]+ <span class="hit-archived small" '
                             r'data-hit-archived>archived</span></span>', hit.group(0))
    assert both.count("data-hit-archived") == 1, "only the archived conversation's hit says so"
    listing = client.get(reverse("responses_app:conversations")).content.decode()
    assert 'name="archived" value="1" data-search-archived' in listing, "the list page's box, unticked"


def test_excerpts_are_escaped_and_mark_the_words_found(owner: Any) -> None:
    answered(owner, "<script>alert(1)</script> about the Nile", "The Nile & its <b>delta</b>.")
    found = hits(owner, "nile")[0]
    text = found.prompt + found.answer
    assert "<script>" not in text and "<b>" not in text, "escaped (ts_headline drops tags, SQLite keeps them escaped)"
    assert "<mark>Nile</mark>" in text and "&amp;" in text


def test_the_search_page_links_each_hit_to_its_turn(owner: Any, teammate: Any) -> None:
    turn = answered(owner, "Mekong delta", "The Mekong ends in a delta.")
    page = client_for(owner).get(reverse("responses_app:search"), {"q": "mekong"})
    html = page.content.decode()
    assert page.status_code == 200 and "1 turn found" in html
    assert f"{reverse('responses_app:chat', args=[turn.conversation_id])}?version={turn.pk}#turn-{turn.pk}" in html
    assert "Mekong" not in client_for(teammate).get(reverse("responses_app:search"), {"q": "mekong"}).content.decode()
    listing = client_for(owner).get(reverse("responses_app:conversations")).content.decode()
    assert 'role="search"' in listing, "the list page has the search box"


def test_a_hit_on_another_version_opens_its_branch_for_that_page_only(owner: Any) -> None:
    first = answered(owner, "Rhine", "The Rhine.")
    second = answered(owner, "Rhône", "The Rhône.", conversation=first.conversation)
    client = client_for(owner)
    response = client.post(reverse("responses_app:chat-edit", args=[first.conversation_id, second.pk]),
                           {"prompt": "Loire", "client_request_id": str(uuid.uuid4())})
    assert response.status_code == 302
    assert [hit.request_id for hit in hits(owner, "Rhône")] == [second.pk]
    page = client.get(reverse("responses_app:search"), {"q": "Rhône"}).content.decode()
    assert 'data-version-age="older"' in page and "in an older version, not the one shown" in page
    link = f"{reverse('responses_app:chat', args=[first.conversation_id])}?version={second.pk}#turn-{second.pk}"
    assert link in page
    opened = client.get(link.split("#")[0]).content.decode()
    assert f'id="turn-{second.pk}"' in opened and "Loire" not in opened.split('id="turn-')[-1]
    assert "data-version-notice" in opened and 'id="composer"' not in opened, "read there; replies go to the saved one"
    html = client.get(reverse("responses_app:chat", args=[first.conversation_id])).content.decode()
    assert f'id="turn-{second.pk}"' not in html and "Loire" in html, "the conversation still shows the version saved"
    assert "data-version-age" not in client.get(reverse("responses_app:search"), {"q": "Loire"}).content.decode()


@postgresql_only
def test_full_text_search_matches_word_forms_and_phrases(owner: Any) -> None:
    rivers = answered(owner, "Which rivers flood?", "Rivers flooding in spring is common.")
    answered(owner, "Spring cleaning", "Open the windows.")
    assert [h.request_id for h in hits(owner, "river flood")] == [rivers.pk], "stemmed: rivers, flooding"
    assert [h.request_id for h in hits(owner, '"flooding in spring"')] == [rivers.pk]
    assert [h.request_id for h in hits(owner, "spring -windows")] == [rivers.pk]
    assert "<mark>" in hits(owner, "river")[0].answer


@sqlite_only
def test_the_plain_search_needs_every_word_as_written(owner: Any) -> None:
    rivers = answered(owner, "Which rivers flood?", "Rivers flooding in spring is common.")
    assert [h.request_id for h in hits(owner, "RIVERS spring")] == [rivers.pk]
    assert hits(owner, "rivers autumn") == []


# --- export ---------------------------------------------------------------------------------------------

def test_export_markdown_and_json_of_the_branch_shown(owner: Any) -> None:
    turn = make_turn(owner, text="The **Amazon** answer", prompt="Biggest river?")
    client = client_for(owner)
    regenerated = client.post(reverse("responses_app:chat-regenerate", args=[turn.conversation_id, turn.pk]),
                              {"client_request_id": str(uuid.uuid4())}, HTTP_ACCEPT="application/json").json()["id"]
    ResponseRequest.objects.filter(pk=regenerated).update(status="completed", final_text="The Nile, by length.")
    client.post(reverse("responses_app:chat-show", args=[turn.conversation_id, turn.pk]))  # the first version
    md = client.get(reverse("responses_app:conversation-export", args=[turn.conversation_id, "md"]))
    assert md.status_code == 200 and md["Content-Type"].startswith("text/markdown")
    assert md["Content-Disposition"] == 'attachment; filename="biggest-river.md"'
    text = md.content.decode()
    assert text.startswith("# Biggest river?\n") and "## You" in text and "Biggest river?" in text
    assert "The **Amazon** answer" in text, "the committed view's Markdown, as written"
    assert "version 1 of 2" in text and "Nile" not in text, "the branch shown only"
    data = json.loads(client.get(reverse("responses_app:conversation-export", args=[turn.conversation_id, "json"]))
                      .content)
    assert data["format"] == "responses-relay.conversation/1"
    [exported] = data["turns"]
    assert exported["id"] == str(turn.pk) and exported["version"] == {"index": 1, "count": 2}
    assert exported["view"]["blocks"][0]["text"] == "The **Amazon** answer" and exported["input"] == "Biggest river?"


def test_nobody_exports_another_user_s_conversation(owner: Any, teammate: Any, staff: Any) -> None:
    turn = make_turn(owner)
    for fmt in ("md", "json"):
        url = reverse("responses_app:conversation-export", args=[turn.conversation_id, fmt])
        assert client_for(teammate).get(url).status_code == 404
        assert client_for(staff).get(url).status_code == 404, "staff read in the admin, never take out"
    assert client_for(owner).get(reverse("responses_app:conversation-export",
                                         args=[turn.conversation_id, "pdf"])).status_code == 404


def test_export_renders_tools_sources_and_errors_in_markdown(owner: Any) -> None:
    blocks: list[dict[str, Any]] = [
        {"id": "t0", "kind": "tool", "tool": "function_call", "name": "get_weather", "state": "done",
         "arguments": '{"city": "Paris"}', "output": "```sunny```"},
        {"id": "o0-c0", "kind": "text", "state": "done", "text": "It is sunny.",
         "annotations": [{"type": "url_citation", "url": "https://example.com/w", "title": "Weather"}]},
    ]
    turn = make_turn(owner, blocks=blocks)
    ResponseRequest.objects.filter(pk=turn.pk).update(error_code="server_error", error_message="it broke")
    text = client_for(owner).get(reverse("responses_app:conversation-export", args=[turn.conversation_id, "md"])
                                 ).content.decode()
    assert "**Function call get_weather**" in text and '"city": "Paris"' in text
    assert "````\n```sunny```\n````" in text, "a fence longer than any inside"
    assert "1. [Weather](https://example.com/w)" in text and "> **server_error:** it broke" in text
    assert connection.vendor in ("sqlite", "postgresql")

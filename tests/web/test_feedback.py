"""Feedback on an answer: its owner marks it helpful or not and may add a note; pressing the same
rating again takes it back; nobody else can; a live answer waits; the analytics count it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from responses_app.models import AnswerFeedback, ResponseRequest
from tests.web.test_pages import chat_url, client_for, make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]
JSON = {"HTTP_ACCEPT": "application/json"}


def feedback_url(request: ResponseRequest) -> str:
    return reverse("responses_app:chat-feedback", args=[request.conversation_id, request.pk])


def stored(request: ResponseRequest) -> list[tuple[int, str]]:
    return list(AnswerFeedback.objects.filter(request=request).values_list("rating", "note"))


def test_a_rating_is_given_changed_with_a_note_and_taken_back(owner: Any) -> None:
    turn = make_turn(owner)
    client = client_for(owner)
    assert client.post(feedback_url(turn), {"rating": "up"}, **JSON).json() == {"rating": "up", "note": ""}
    assert stored(turn) == [(1, "")]
    answer = client.post(feedback_url(turn), {"rating": "down", "note": "It cited the wrong year."}, **JSON)
    assert answer.json() == {"rating": "down", "note": "It cited the wrong year."}
    assert client.post(feedback_url(turn), {"rating": "note", "note": "Wrong year, 1998."}, **JSON).json() == {
        "rating": "down", "note": "Wrong year, 1998."}
    assert stored(turn) == [(-1, "Wrong year, 1998.")], "one row per person and answer"
    assert client.post(feedback_url(turn), {"rating": "down"}, **JSON).json() == {"rating": "", "note": ""}
    assert stored(turn) == []


def test_without_javascript_the_form_posts_and_the_page_shows_the_rating(owner: Any) -> None:
    turn = make_turn(owner)
    client = client_for(owner)
    page = client.get(chat_url(turn)).content.decode()
    assert 'data-feedback' in page and 'aria-pressed="false"' in page
    answer = client.post(feedback_url(turn), {"rating": "up", "note": ""})
    assert answer.status_code == 302 and answer["Location"].endswith(f"#turn-{turn.pk}")
    page = client.get(chat_url(turn)).content.decode()
    assert 'value="up" class="feedback-rate" aria-pressed="true"' in page
    # The same rating with the note unchanged: taken back, as the script's press again is.
    client.post(feedback_url(turn), {"rating": "up", "note": ""})
    assert stored(turn) == []


def test_a_note_needs_a_rating_and_a_live_answer_waits(owner: Any) -> None:
    client = client_for(owner)
    turn = make_turn(owner)
    refused = client.post(feedback_url(turn), {"rating": "note", "note": "hm"}, **JSON)
    assert refused.status_code == 400 and "Helpful" in refused.json()["error"]
    assert client.post(feedback_url(turn), {"rating": "sideways"}, **JSON).status_code == 400
    live = make_turn(owner, status="streaming")
    assert client.post(feedback_url(live), {"rating": "up"}, **JSON).status_code == 409
    assert "data-feedback" not in client.get(chat_url(live)).content.decode()
    assert stored(turn) == stored(live) == []


def test_only_the_owner_rates_an_answer(owner: Any, teammate: Any, staff: Any) -> None:
    turn = make_turn(owner)
    for other in (teammate, staff):
        assert client_for(other).post(feedback_url(turn), {"rating": "up"}, **JSON).status_code == 404
    assert client_for(owner).post(feedback_url(turn), {"rating": "up"}, **JSON).status_code == 200
    other = make_turn(owner)  # the URL names a conversation the answer is not in
    wrong = reverse("responses_app:chat-feedback", args=[other.conversation_id, turn.pk])
    assert client_for(owner).post(wrong, {"rating": "down"}, **JSON).status_code == 404
    assert client_for(owner).get(feedback_url(turn)).status_code == 405
    assert stored(turn) == [(1, "")]


def test_the_analytics_count_ratings_and_list_the_notes(owner: Any) -> None:
    client = client_for(owner)
    for rating, note in (("up", ""), ("up", ""), ("down", "Too long <b>really</b>")):
        client.post(feedback_url(make_turn(owner)), {"rating": rating, "note": note}, **JSON)
    boss = get_user_model().objects.create_user("boss", password="pw", is_staff=True, is_superuser=True)
    html = client_for(boss).get(reverse("responses_app:analytics")).content.decode()
    assert 'data-stat="helpful">2<' in html and 'data-stat="not-helpful">1<' in html and "67% helpful" in html
    assert "Too long &lt;b&gt;really&lt;/b&gt;" in html, "a note is shown escaped"
    admin = client_for(boss).get(reverse("admin:responses_app_answerfeedback_changelist"), {"q": "Too long"})
    assert admin.status_code == 200 and "Too long" in admin.content.decode()

"""The conversation sidebar, Pin and Archive, and the Undo of a Delete: who may do what
(the owner only, with the page's CSRF token), what the pages list and in which order, and how long
a Delete can be undone."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from responses_app import conversation_lists
from responses_app.models import Conversation, ResponseRequest
from tests.web.test_pages import client_for, make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]

LIST = reverse("responses_app:conversations")


def named(owner: Any, title: str, status: str = "completed", minutes_ago: int = 0) -> Conversation:
    conversation = make_turn(owner, status=status).conversation
    assert conversation is not None
    Conversation.objects.filter(pk=conversation.pk).update(
        title=title, updated=timezone.now() - timedelta(minutes=minutes_ago))
    return Conversation.objects.get(pk=conversation.pk)


def titles(html: str, css: str) -> list[str]:
    """The titles of a list on the page, in order (`css`: the class of each title's span)."""
    return re.findall(rf'<span class="{css}"[^>]*>([^<]*)</span>', html)


def post(client: Client, name: str, conversation: Conversation, **data: str) -> Any:
    return client.post(reverse(f"responses_app:{name}", args=[conversation.pk]), data)


def test_pinned_conversations_come_first_in_the_list_and_the_sidebar(owner: Any) -> None:
    old = named(owner, "Old one", minutes_ago=30)
    named(owner, "Middle", minutes_ago=20)
    new = named(owner, "Newest", minutes_ago=10)
    client = client_for(owner)
    assert titles(client.get(LIST).content.decode(), "title") == ["Newest", "Middle", "Old one"]
    assert post(client, "conversation-pin", old, pinned="1").status_code == 302
    assert titles(client.get(LIST).content.decode(), "title") == ["Old one", "Newest", "Middle"]
    chat = client.get(reverse("responses_app:chat", args=[new.pk])).content.decode()
    assert titles(chat, "sidebar-title") == ["Old one", "Newest", "Middle"]
    assert re.search(rf'href="/c/{new.pk}/" aria-current="page"', chat), "the page's own conversation is current"
    assert chat.count('aria-current="page"') == 1
    post(client, "conversation-pin", old, pinned="0")
    assert titles(client.get(LIST).content.decode(), "title") == ["Newest", "Middle", "Old one"]


def test_archived_conversations_leave_the_list_and_sidebar_and_stay_reachable(owner: Any) -> None:
    kept = named(owner, "Kept")
    shelved = named(owner, "Shelved")
    client = client_for(owner)
    response = post(client, "conversation-archive", shelved, archived="1", next=LIST)
    assert response.status_code == 302 and response["Location"] == LIST
    listing = client.get(LIST).content.decode()
    assert titles(listing, "title") == ["Kept"] and "Archived (1)" in listing
    chat = client.get(reverse("responses_app:chat", args=[kept.pk])).content.decode()
    assert titles(chat, "sidebar-title") == ["Kept"]
    archived = client.get(LIST + "?archived=1").content.decode()
    assert titles(archived, "title") == ["Shelved"] and "Unarchive" in archived
    assert 'id="composer"' not in archived and "Skip to content" in archived  # no message box, no skip to one
    page = client.get(reverse("responses_app:chat", args=[shelved.pk]))
    assert page.status_code == 200 and "data-archived-notice" in page.content.decode()
    post(client, "conversation-archive", shelved, archived="0")
    assert titles(client.get(LIST).content.decode(), "title") == ["Shelved", "Kept"]


def test_pin_and_archive_are_the_owner_s_only(owner: Any, teammate: Any, staff: Any) -> None:
    conversation = named(owner, "Mine")
    for name, field in (("conversation-pin", "pinned"), ("conversation-archive", "archived")):
        assert post(client_for(teammate), name, conversation, **{field: "1"}).status_code == 404
        assert post(client_for(staff), name, conversation, **{field: "1"}).status_code == 403  # staff read only
        assert client_for(owner).get(reverse(f"responses_app:{name}", args=[conversation.pk])).status_code == 405
    conversation.refresh_from_db()
    assert conversation.pinned_at is None and conversation.archived_at is None


def test_the_actions_need_the_page_s_csrf_token(owner: Any) -> None:
    conversation = named(owner, "Guarded")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner)
    for name, field in (("conversation-pin", "pinned"), ("conversation-archive", "archived")):
        assert post(strict, name, conversation, **{field: "1"}).status_code == 403
    post(client_for(owner), "conversation-delete", conversation)
    assert post(strict, "conversation-restore", conversation).status_code == 403
    conversation.refresh_from_db()
    assert conversation.pinned_at is None and conversation.archived_at is None and conversation.deleted_at


def test_a_redirect_back_stays_on_this_site(owner: Any) -> None:
    conversation = named(owner, "Here")
    response = post(client_for(owner), "conversation-pin", conversation, pinned="1", next="https://evil.example/")
    assert response["Location"] == reverse("responses_app:chat", args=[conversation.pk])


def test_delete_offers_undo_and_undo_restores_it(owner: Any, teammate: Any) -> None:
    conversation = named(owner, "Regretted")
    client = client_for(owner)
    response = post(client, "conversation-delete", conversation)
    assert response["Location"] == f"{LIST}?deleted={conversation.pk}"
    listing = client.get(response["Location"]).content.decode()
    assert "Deleted “Regretted”." in listing and "data-undo-notice" in listing
    assert "Regretted" not in titles(listing, "title")
    assert 'action="' + reverse("responses_app:conversation-restore", args=[conversation.pk]) in listing
    assert "data-undo-notice" not in client_for(teammate).get(response["Location"]).content.decode()
    assert post(client_for(teammate), "conversation-restore", conversation).status_code == 404, "owner only"
    restored = post(client, "conversation-restore", conversation)
    assert restored["Location"] == reverse("responses_app:chat", args=[conversation.pk])
    assert client.get(restored["Location"]).status_code == 200
    assert titles(client.get(LIST).content.decode(), "title") == ["Regretted"]
    assert "data-undo-notice" not in client.get(response["Location"]).content.decode(), "nothing left to undo"


def test_undo_ends_after_its_window(owner: Any) -> None:
    conversation = named(owner, "Long gone")
    client = client_for(owner)
    post(client, "conversation-delete", conversation)
    late = timezone.now() - timedelta(seconds=conversation_lists.UNDO_S + 5)
    Conversation.objects.filter(pk=conversation.pk).update(deleted_at=late)
    assert "data-undo-notice" not in client.get(f"{LIST}?deleted={conversation.pk}").content.decode()
    refused = post(client, "conversation-restore", conversation)
    assert refused.status_code == 404 and "cannot be restored" in refused.content.decode()
    assert Conversation.objects.get(pk=conversation.pk).deleted_at == late
    assert "data-undo-notice" not in client.get(f"{LIST}?deleted=not-a-uuid").content.decode()


def test_the_sidebar_marks_a_conversation_with_an_answer_in_flight(owner: Any) -> None:
    quiet = named(owner, "Quiet")
    busy = named(owner, "Busy", status="streaming")
    client = client_for(owner)
    fragment = client.get(reverse("responses_app:sidebar") + f"?current={quiet.pk}")
    assert fragment.status_code == 200 and fragment["Cache-Control"] == "no-store"
    html = fragment.content.decode()
    live = re.findall(r'data-conversation="([^"]+)" data-live', html)
    assert live == [str(busy.pk)] and html.count("data-live-marker") == 1
    assert f'href="/c/{quiet.pk}/" aria-current="page"' in html
    ResponseRequest.objects.filter(conversation=busy).update(status="completed")
    assert "data-live" not in client.get(reverse("responses_app:sidebar")).content.decode()
    assert Client().get(reverse("responses_app:sidebar")).status_code == 302, "signed in only"


def test_the_sidebar_is_bounded_and_links_to_every_conversation(owner: Any, django_assert_max_num_queries: Any
                                                                 ) -> None:
    for n in range(conversation_lists.SIDEBAR_SIZE + 2):
        Conversation.objects.create(owner=owner, title=f"Chat {n}")
    client = client_for(owner)
    with django_assert_max_num_queries(6):  # the session, the user, the list, the live ones: not one per row
        html = client.get(reverse("responses_app:sidebar")).content.decode()
    assert len(titles(html, "sidebar-title")) == conversation_lists.SIDEBAR_SIZE
    assert "The 30 most recent" in html


def test_each_address_sets_its_own_mark_and_a_second_set_keeps_the_first(owner: Any) -> None:
    conversation = named(owner, "Marked")
    client = client_for(owner)
    post(client, "conversation-pin", conversation, archived="1")  # the other mark's field: not this one's
    conversation.refresh_from_db()
    assert conversation.pinned_at is None and conversation.archived_at is None
    post(client, "conversation-pin", conversation, pinned="1")
    conversation.refresh_from_db()
    first = conversation.pinned_at
    assert first is not None and conversation.archived_at is None
    post(client, "conversation-pin", conversation, pinned="1")
    post(client, "conversation-archive", conversation, archived="1")
    conversation.refresh_from_db()
    assert conversation.pinned_at == first and conversation.archived_at is not None


def test_set_mark_refuses_a_mark_it_does_not_know(owner: Any) -> None:
    conversation = named(owner, "Unmarked")
    with pytest.raises(ValueError, match="pinned or archived"):
        conversation_lists.set_mark(conversation=conversation, mark="deleted", on=True)  # type: ignore[arg-type]
    conversation.refresh_from_db()
    assert conversation.deleted_at is None

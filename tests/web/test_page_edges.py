"""The pages around the chat, without a browser: a refused send says why in words next to the
composer (the page opens there), a link to a turn's version changes nothing saved, share links
that no longer work or need a login say so, staff-only analytics refuse politely, the site's
icon, the admin's search by short id and model, and `make run`'s quiet migrations. Where a person
sees it in Chromium: tests/browser/test_page_edges.py."""

from __future__ import annotations

import logging
import re
import uuid
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.templatetags.static import static
from django.test import Client
from django.urls import reverse

from responses_app import limits, services
from responses_app.models import Conversation, ResponseRequest
from responses_app.web import share_links
from tests.web.test_pages import client_for, make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_limits() -> None:
    limits.process_cache().clear()  # the rate windows of other tests


def send(client: Client, url: str, text: str, **extra: str) -> Any:
    return client.post(url, {"input": text, "model": "sim-text", "client_request_id": str(uuid.uuid4()), **extra})


def error_box(html: str) -> str:
    match = re.search(r'<div class="form-errors"[^>]*data-composer-error>(.*?)</div>', html, re.S)
    assert match, "the composer's error box, shown"
    return match.group(0)


# --- a refused send -----------------------------------------------------------------------------

def test_a_send_past_the_answers_running_says_so_in_words_where_the_page_opens(owner: Any, settings: Any) -> None:
    settings.RELAY_MAX_CONCURRENT_PER_USER = 4
    client = client_for(owner)
    new = reverse("responses_app:conversation-new")
    for n in range(4):
        assert send(client, new, f"question {n}").status_code == 302
    refused = send(client, new, "a fifth question I typed with care")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    html = refused.content.decode()
    box = error_box(html)
    assert 'role="alert"' in box and 'tabindex="-1"' in box and "autofocus" in box, "focused: the page opens there"
    assert "You have 4 answers running. Wait for one to finish or stop one, then send again." in box
    assert "RELAY_" not in html and "<strong>request</strong>" not in box, "no setting, no field name"
    assert "a fifth question I typed with care</textarea>" in html, "the typed text is kept"
    assert html.index("data-composer-error") < html.index('id="composer-input"'), "right above the prompt box"

    conversation = Conversation.objects.filter(owner=owner).first()
    assert conversation is not None
    reply = send(client, reverse("responses_app:chat", args=[conversation.pk]), "a reply I typed")
    assert reply.status_code == 429
    assert "You have 4 answers running." in error_box(reply.content.decode())
    assert "a reply I typed</textarea>" in reply.content.decode()
    assert ResponseRequest.objects.filter(owner=owner).count() == 4


def test_a_send_past_the_rate_says_when_to_send_again(owner: Any, settings: Any) -> None:
    settings.RELAY_SUBMIT_RATE = "2/h"
    client = client_for(owner)
    new = reverse("responses_app:conversation-new")
    assert send(client, new, "one").status_code == 302 and send(client, new, "two").status_code == 302
    refused = send(client, new, "three")
    assert refused.status_code == 429
    box = error_box(refused.content.decode())
    match = re.search(r"You have sent as many messages as allowed for now \(2 per hour\)\. "
                      r"You can send again in (\d+) (seconds|minutes)\.", box)
    assert match, box
    wait = int(match.group(1)) * (60 if match.group(2) == "minutes" else 1)
    assert abs(wait - int(refused["Retry-After"])) <= 60, "the words say what Retry-After says"
    assert "RELAY_" not in refused.content.decode()


def test_a_refused_field_is_named_as_the_form_names_it(owner: Any) -> None:
    refused = send(client_for(owner), reverse("responses_app:conversation-new"), "hello", metadata="not json")
    assert refused.status_code == 400
    box = error_box(refused.content.decode())
    assert "The metadata (under Advanced) is not valid JSON." in box and "metadata:" not in box


# --- versions: a GET changes nothing --------------------------------------------------------------

def three_versions(owner: Any) -> tuple[Conversation, list[ResponseRequest]]:
    """Turn 1 in three versions, the newest with two turns after it (the version shown)."""
    conversation = services.conversation_create(owner=owner)

    def turn(text: str, parent: ResponseRequest | None) -> ResponseRequest:
        request, _ = services.request_create(owner=owner, input=text, model="sim-text", conversation=conversation,
                                             client_request_id=str(uuid.uuid4()), parent_id=parent and parent.pk)
        ResponseRequest.objects.filter(pk=request.pk).update(status="completed", final_text=f"About {text}.")
        return request

    first, second = turn("Amazon", None), turn("Congo", None)
    third = turn("Yangtze", None)
    later = turn("Mekong", turn("Ganges", third))
    conversation.refresh_from_db()
    assert conversation.leaf_id == later.pk
    return conversation, [first, second, third]


def test_opening_an_older_version_by_get_saves_nothing(owner: Any) -> None:
    conversation, (first, second, third) = three_versions(owner)
    client = client_for(owner)
    show = reverse("responses_app:chat-show", args=[conversation.pk, first.pk])
    opened = client.get(show)
    chat = reverse("responses_app:chat", args=[conversation.pk])
    assert opened.status_code == 302 and opened["Location"] == f"{chat}?version={first.pk}#turn-{first.pk}"
    conversation.refresh_from_db()
    page = client.get(opened["Location"].split("#")[0]).content.decode()
    assert conversation.leaf_id != first.pk and 'data-version-count>1/3<' in page and "Ganges" not in page
    assert "You are reading another version of this conversation" in page
    assert f'action="{show}"' in page, "a POST keeps switching on purpose"
    saved = client.get(chat).content.decode()
    assert "Ganges" in saved and "Mekong" in saved and 'data-version-count>3/3<' in saved, "all three turns, still"
    assert "data-version-notice" not in saved
    assert client.get(f"{chat}?version=not-a-uuid").status_code == 200
    on_branch = client.get(f"{chat}?version={third.pk}").content.decode()
    assert "data-version-notice" not in on_branch and 'id="composer"' in on_branch, "on the branch shown: the page"

    assert client.post(show).status_code == 302  # the arrows: a deliberate switch
    conversation.refresh_from_db()
    assert conversation.leaf_id == first.pk
    assert client.get(reverse("responses_app:chat-show", args=[conversation.pk, uuid.uuid4()])).status_code == 404


def test_search_results_say_which_are_in_an_older_version(owner: Any) -> None:
    conversation, (first, second, third) = three_versions(owner)
    client = client_for(owner)
    html = client.get(reverse("responses_app:search"), {"q": "About"}).content.decode()
    older = re.findall(r'data-request-id="([0-9a-f-]+)" data-version-age="older"', html)
    assert sorted(older) == sorted(str(r.pk) for r in (first, second)), "the two older versions of turn 1"
    assert html.count("in an older version, not the one shown") == 2
    assert f'data-request-id="{third.pk}">' in html, "the version shown is not labelled"
    conversation.refresh_from_db()
    assert conversation.leaf_id not in (first.pk, second.pk), "searching changed nothing"


# --- share links --------------------------------------------------------------------------------

def test_a_revoked_or_missing_link_says_so_in_a_page(owner: Any, teammate: Any) -> None:
    turn = make_turn(owner)
    share = services_share(owner, turn)
    client = client_for(owner)
    client.post(reverse("responses_app:share-revoke", args=[turn.conversation_id, share.pk]))
    for visitor in (client_for(teammate), Client()):
        for token in (share.token, "never-made"):
            page = visitor.get(reverse("responses_app:shared", args=[token]))
            html = page.content.decode()
            assert page.status_code == 404, token
            assert "This link was revoked or never existed" in html and 'class="relay relay-page' in html
            assert "chat.css" in html, "the app's styling"
    turn_url = reverse("responses_app:shared-turn", args=[share.token, turn.pk])
    assert client_for(teammate).get(turn_url).status_code == 404, "the script's question: a status, no page"
    anonymous = Client()
    assert anonymous.get(turn_url).status_code == 401
    page = anonymous.get(reverse("login")).content.decode()
    assert share_links.LOGIN_WHY not in page, "no message left behind for a later page"


def services_share(owner: Any, turn: ResponseRequest) -> Any:
    from responses_app import shares

    return shares.share_create(conversation=turn.conversation, user=owner)  # type: ignore[arg-type]


def test_a_logged_out_visitor_of_a_link_for_signed_in_people_is_told_why_on_the_login_page(owner: Any) -> None:
    turn = make_turn(owner)
    share = services_share(owner, turn)
    visitor = Client()
    page = visitor.get(reverse("responses_app:shared", args=[share.token]), follow=True)
    html = page.content.decode()
    assert page.status_code == 200 and page.redirect_chain[-1][0].startswith(reverse("login"))
    assert share_links.LOGIN_WHY in html and "data-login-why" in html
    shared = reverse("responses_app:shared", args=[share.token])
    opened = visitor.post(reverse("login"), {"username": "owner", "password": "pw", "next": shared}, follow=True)
    assert opened.redirect_chain[-1][0] == shared and "(shared)" in opened.content.decode(), "then the link opens"


def test_a_new_link_takes_the_focus_and_has_a_copy_button(owner: Any) -> None:
    turn = make_turn(owner)
    client = client_for(owner)
    made = client.post(reverse("responses_app:share-create", args=[turn.conversation_id]))
    share = turn.conversation.shares.get()  # type: ignore[union-attr]
    assert made.status_code == 302 and made["Location"].endswith(f"?tools=open&share={share.pk}#share-{share.pk}")
    html = client.get(made["Location"].split("#")[0]).content.decode()
    row = re.search(rf'<li id="share-{share.pk}"[^>]*>', html)
    assert row and "autofocus" in row.group(0) and 'tabindex="-1"' in row.group(0)
    assert 'data-copy="link"' in html and "Copy link" in html and 'role="status" data-copy-status' in html
    again = client.get(reverse("responses_app:chat", args=[turn.conversation_id]) + "?tools=open").content.decode()
    assert "data-new-share" not in again, "only the link just made"


# --- analytics ---------------------------------------------------------------------------------

def test_analytics_refuse_a_non_staff_user_with_a_page_and_no_error_logged(owner: Any, caplog: Any) -> None:
    with caplog.at_level(logging.DEBUG):
        page = client_for(owner).get(reverse("responses_app:analytics"))
    html = page.content.decode()
    assert page.status_code == 403 and "Analytics are for staff" in html and "Only staff accounts" in html
    assert "You are signed in as owner" in html and 'class="relay relay-page' in html
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], "no error, no traceback"


# --- the site's icon ----------------------------------------------------------------------------

def test_favicon_ico_is_the_app_s_icon_and_the_app_s_base_links_it(owner: Any, settings: Any) -> None:
    icon = Client().get("/favicon.ico")
    assert icon.status_code == 302 and icon["Location"] == static("responses_app/favicon.svg")
    assert "max-age=86400" in icon["Cache-Control"]
    assert finders.find("responses_app/favicon.svg"), "the file is the app's own static file"
    settings.RELAY_BASE_TEMPLATE = "responses_app/base.html"
    html = client_for(owner).get(reverse("responses_app:conversations")).content.decode()
    assert f'<link rel="icon" href="{static("responses_app/favicon.svg")}" type="image/svg+xml">' in html


# --- the admin's search --------------------------------------------------------------------------

def test_the_admin_finds_a_request_by_its_short_id_and_its_model(owner: Any) -> None:
    root = get_user_model().objects.create_superuser("root", password="pw")
    one, other = make_turn(owner), make_turn(owner)
    ResponseRequest.objects.filter(pk=other.pk).update(model="sim-reasoning")
    admin = client_for(root)
    url = reverse("admin:responses_app_responserequest_changelist")
    listing = admin.get(url).content.decode()
    short = str(one.pk)[:8]
    assert f">{short}<" in listing, "the short id the list shows"
    found = admin.get(url, {"q": short}).context["cl"].result_list
    assert [r.pk for r in found] == [one.pk]
    assert [r.pk for r in admin.get(url, {"q": "sim-reasoning"}).context["cl"].result_list] == [other.pk]
    assert admin.get(url, {"q": "owner"}).context["cl"].result_count == 2, "the owner's name, as before"


# --- make run ------------------------------------------------------------------------------------

def test_make_run_migrates_in_one_line() -> None:
    out = StringIO()
    call_command("migrate_quietly", stdout=out)
    assert out.getvalue() == "Database up to date: no migrations to apply.\n"
    recipe = (ROOT / "Makefile").read_text().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "manage.py migrate_quietly" in recipe and "manage.py migrate " not in recipe

"""The admin audit: list columns, filters and search; the read-only detail with its inlines; the
paginated event log; and the .sse download, checked by replaying it (from a real relayed stream)."""

from __future__ import annotations

import io
import uuid
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from responses_app import services
from responses_app.models import Checkpoint, EventRecord, ResponseRequest, Segment
from responses_app.streaming.replay import replay_bytes

CHANGELIST = "admin:responses_app_responserequest_changelist"


@pytest.fixture
def admin_client_(db: Any) -> Client:
    user = get_user_model().objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice(db: Any) -> Any:
    return get_user_model().objects.create_user("alice", password="pw")


def make_request(owner: Any, *, status: str = "completed", model: str = "sim-text", response_id: str = "",
                 batches: int = 0) -> ResponseRequest:
    conversation = services.conversation_create(owner=owner)
    request, _ = services.request_create(owner=owner, input="Hi", model=model, client_request_id=str(uuid.uuid4()),
                                         conversation=conversation)
    ResponseRequest.objects.filter(pk=request.pk).update(
        status=status, response_id=response_id, events=batches * 2, duration_ms=1500,
        first_text_at=request.created + timedelta(milliseconds=250))
    Segment.objects.create(request=request, index=0, kind="initial", outcome=status, events=batches * 2)
    for revision in (3, 9):
        Checkpoint.objects.create(request=request, revision=revision, sequence_number=revision, reason="boundary",
                                  view={"revision": revision, "meta": {}, "blocks": []}, snapshot={})
    for i in range(batches):
        EventRecord.objects.create(request=request, first_sequence=2 * i, last_sequence=2 * i + 1, count=2,
                                   data=f'data: {{"type":"batch-{i}-a"}}\n\ndata: {{"type":"batch-{i}-b"}}\n\n')
    request.refresh_from_db()
    return request


@pytest.mark.django_db
def test_changelist_columns_filters_and_search(admin_client_: Client, alice: Any) -> None:
    done = make_request(alice, response_id="resp_findme")
    make_request(alice, status="failed", model="sim-failed")
    url = reverse(CHANGELIST)
    html = admin_client_.get(url).content.decode()
    for column in ("time to first text (ms)", "Duration ms", "Events", "Response id", "Owner"):
        assert column.lower() in html.lower()
    assert ">250<" in html, "time to first text in ms"
    assert "By status" in html and "By model" in html and "By created" in html

    assert admin_client_.get(url, {"status__exact": "failed"}).context["cl"].result_count == 1
    assert admin_client_.get(url, {"model": "sim-failed"}).context["cl"].result_count == 1
    for term in ("resp_findme", str(done.pk), "alice"):
        count = admin_client_.get(url, {"q": term}).context["cl"].result_count
        assert count == (2 if term == "alice" else 1), term


@pytest.mark.django_db
def test_detail_is_read_only_with_inlines_and_links(admin_client_: Client, alice: Any) -> None:
    request = make_request(alice, status="streaming", batches=3)
    response = admin_client_.get(reverse("admin:responses_app_responserequest_change", args=[request.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="_save"' not in html, "an audit record is not editable"
    assert "Checkpoints" in html and "Segments" in html and "Tool calls" in html
    assert "boundary" in html
    assert reverse("admin:responses_app_responserequest_events", args=[request.pk]) in html
    assert reverse("admin:responses_app_responserequest_events_sse", args=[request.pk]) in html
    chat = reverse("responses_app:chat", args=[request.conversation_id])
    assert f"{chat}#turn-{request.pk}" in html and "Watch live" in html
    assert admin_client_.post(reverse("admin:responses_app_responserequest_delete", args=[request.pk])
                              ).status_code == 403


@pytest.mark.django_db
def test_event_log_is_paginated(admin_client_: Client, alice: Any) -> None:
    request = make_request(alice, batches=25)
    url = reverse("admin:responses_app_responserequest_events", args=[request.pk])
    first = admin_client_.get(url).content.decode()
    assert "batch-0-a" in first and "batch-19-b" in first and "batch-20-a" not in first
    assert "Page 1 of 2" in first
    second = admin_client_.get(url, {"page": 2}).content.decode()
    assert "batch-20-a" in second and "batch-24-b" in second and "batch-0-a" not in second


@pytest.mark.django_db
def test_event_log_needs_staff(alice: Any) -> None:
    request = make_request(alice, batches=1)
    client = Client()
    client.force_login(alice)
    for name in ("admin:responses_app_responserequest_events", "admin:responses_app_responserequest_events_sse"):
        response = client.get(reverse(name, args=[request.pk]))
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.django_db
def test_download_action_one_sse_or_a_zip(admin_client_: Client, alice: Any) -> None:
    first = make_request(alice, batches=2)
    second = make_request(alice, batches=1)
    url = reverse(CHANGELIST)
    one = admin_client_.post(url, {"action": "download_event_logs", "_selected_action": [first.pk]})
    assert one["Content-Disposition"] == f'attachment; filename="request-{first.pk}.sse"'
    assert one.content.decode() == "".join(b.text for b in first.event_batches.order_by("id"))
    both = admin_client_.post(url, {"action": "download_event_logs", "_selected_action": [first.pk, second.pk]})
    assert both["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(both.content)).namelist()
    assert sorted(names) == sorted([f"request-{first.pk}.sse", f"request-{second.pk}.sse"])


@pytest.mark.django_db
def test_conversation_is_registered(admin_client_: Client, alice: Any) -> None:
    request = make_request(alice)
    assert admin_client_.get(reverse("admin:responses_app_conversation_changelist")).status_code == 200
    html = admin_client_.get(reverse("admin:responses_app_conversation_change",
                                     args=[request.conversation_id])).content.decode()
    assert reverse("responses_app:chat", args=[request.conversation_id]) in html


# --- a real relayed stream, downloaded and replayed ----------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("model", ["sim-citations", "sim-incomplete", "sim-failed"])
async def test_downloaded_event_log_replays_to_the_same_outcome(
        relay_settings: Any, model: str, tmp_path: Path) -> None:
    from tests.relay.helpers import Watcher, connect
    from tests.relay.helpers import make_request as make_live_request

    owner = await sync_to_async(get_user_model().objects.create_user)(f"owner-{model}", password="pw")
    root = await sync_to_async(get_user_model().objects.create_superuser)(f"root-{model}", password="pw")
    request = await make_live_request(owner, model, {"sim.tokens_per_s": "0"})
    communicator = await connect(owner, request.pk)
    connected, _ = await communicator.connect()
    assert connected
    await Watcher(communicator).until_terminal(60)
    await communicator.disconnect()

    def download() -> tuple[bytes, ResponseRequest]:
        client = Client()
        client.force_login(root)
        response = client.get(reverse("admin:responses_app_responserequest_events_sse", args=[request.pk]))
        assert response.status_code == 200
        assert response["Content-Disposition"].endswith('.sse"')
        return response.content, ResponseRequest.objects.get(pk=request.pk)

    data, saved = await sync_to_async(download)()
    assert saved.status in ResponseRequest.TERMINAL
    result = replay_bytes(data)
    assert result.terminal
    assert result.status == saved.status
    assert result.events == saved.events
    path = tmp_path / "log.sse"
    path.write_bytes(data)
    await sync_to_async(call_command)("replay", str(path), stdout=io.StringIO(), stderr=io.StringIO())


# --- the safety policy's verdicts -------------------------------------------------------------------

SECRET = "the launch codes are 0000"


def with_verdicts(owner: Any) -> ResponseRequest:
    request = make_request(owner)
    services.safety_verdicts_record(request_id=request.pk, verdicts=[
        {"kind": "input", "mode": "precheck", "text": "Hi", "flagged": False, "action": "passed",
         "checker": "rules", "elapsed_ms": 0.4},
        {"kind": "output", "mode": "progressive", "block_id": "m0-c0", "start": 120, "end": 145, "text": SECRET,
         "flagged": True, "action": "retracted", "checker": "moderation", "categories": ["illicit", "violence"],
         "elapsed_ms": 31.5},
        {"kind": "tool_output", "mode": "buffered", "block_id": "fc_1", "text": "tool said", "flagged": True,
         "action": "withheld", "checker": "moderation", "error": "timeout after 2 s", "elapsed_ms": 2000.0},
    ])
    return request


def staff_client(*perms: str) -> Client:
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user(f"staff-{uuid.uuid4().hex[:8]}", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=perms))
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def change_page(client: Client, request: ResponseRequest) -> str:
    response = client.get(reverse("admin:responses_app_responserequest_change", args=[request.pk]))
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.django_db
def test_the_request_page_shows_each_verdict_and_the_text_to_a_superuser(admin_client_: Client, alice: Any) -> None:
    html = change_page(admin_client_, with_verdicts(alice))
    assert "Safety verdicts" in html
    for shown in ("precheck", "progressive", "retracted", "withheld", "m0-c0", ">120<", ">145<",
                  "illicit, violence", "timeout after 2 s", "31.5", "moderation"):
        assert shown in html.lower(), shown
    assert SECRET in html and "tool said" in html


@pytest.mark.django_db
def test_staff_without_the_permission_see_the_verdicts_but_not_the_text(alice: Any) -> None:
    request = with_verdicts(alice)
    html = change_page(staff_client("view_responserequest"), request)
    assert "Retracted" in html and "illicit, violence" in html and "timeout after 2 s" in html
    assert SECRET not in html and "tool said" not in html
    assert SECRET in change_page(staff_client("view_responserequest", "view_safetyverdict"), request)


@pytest.mark.django_db
def test_the_verdict_changelist_filters_by_action_kind_and_checker(admin_client_: Client, alice: Any) -> None:
    with_verdicts(alice)
    url = reverse("admin:responses_app_safetyverdict_changelist")
    html = admin_client_.get(url).content.decode()
    assert "By action" in html and "By kind" in html and "By checker" in html
    count = lambda **query: admin_client_.get(url, query).context["cl"].result_count  # noqa: E731
    assert count() == 3
    assert count(action__exact="retracted") == 1 and count(kind__exact="input") == 1
    assert count(checker__exact="moderation") == 2 and count(checker__exact="moderation", action__exact="withheld") == 1


@pytest.mark.django_db
def test_a_verdict_page_gates_its_text_and_nobody_edits_it(admin_client_: Client, alice: Any) -> None:
    request = with_verdicts(alice)
    from responses_app.models import SafetyVerdict

    verdict = SafetyVerdict.objects.get(request=request, action="retracted")
    url = reverse("admin:responses_app_safetyverdict_change", args=[verdict.pk])
    assert SECRET in admin_client_.get(url).content.decode()
    admin_client_.raise_request_exception = False  # a refusal is a 403 page, as in production
    assert admin_client_.post(url, {"text": "edited"}).status_code == 403
    staff = staff_client("view_responserequest")
    assert staff.get(url).status_code == 403
    assert staff.get(reverse("admin:responses_app_safetyverdict_changelist")).status_code == 403


# --- withheld text: every page that can show it needs view_safetyverdict ------------------------------

ANSWER_TEXT = {"final_text": "held back: the launch codes", "error_message": "failed saying the launch codes"}


def with_withheld_text(owner: Any, *, action: str = "withheld") -> ResponseRequest:
    """A request whose answer the policy withheld (or whose prompt it blocked), with the same text
    in everything derived from it: its final text, error, a tool call, a segment and its event log."""
    from responses_app.models import ToolCall

    request = make_request(owner, batches=1)
    ResponseRequest.objects.filter(pk=request.pk).update(**ANSWER_TEXT)
    ToolCall.objects.create(request=request, call_id="call_1", name="lookup", arguments={"q": "launch codes args"},
                            output="launch codes output")
    Segment.objects.filter(request=request).update(detail="launch codes detail")
    EventRecord.objects.create(request=request, first_sequence=9, last_sequence=9, count=1,
                               data=f'data: {{"type":"response.output_text.delta","delta":"{SECRET}"}}\n\n')
    services.safety_verdicts_record(request_id=request.pk, verdicts=[
        {"kind": "output", "mode": "buffered", "block_id": "m0-c0", "text": SECRET, "flagged": True,
         "action": action, "checker": "rules", "elapsed_ms": 0.1}])
    request.refresh_from_db()
    return request


def log_answers(client: Client, request: ResponseRequest) -> tuple[int, int, int]:
    """The event log page, events.sse and the download action, as statuses (the action: 200 when
    it downloaded, 302 when it refused and went back to the list)."""
    page = client.get(reverse("admin:responses_app_responserequest_events", args=[request.pk]))
    sse = client.get(reverse("admin:responses_app_responserequest_events_sse", args=[request.pk]))
    action = client.post(reverse(CHANGELIST), {"action": "download_event_logs", "_selected_action": [request.pk]})
    return page.status_code, sse.status_code, action.status_code


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["withheld", "retracted", "input_blocked"])
def test_withheld_text_is_on_no_admin_page_without_the_permission(alice: Any, action: str) -> None:
    request = with_withheld_text(alice, action=action)
    auditor = staff_client("view_responserequest", "view_toolcall", "view_segment")
    html = change_page(auditor, request)
    assert "view_safetyverdict permission" in html, "the page says why"
    assert "launch codes" not in html and SECRET not in html
    assert "Event log (" not in html, "no link to what would be refused"
    assert log_answers(auditor, request) == (403, 403, 302)
    listing = auditor.get(reverse(CHANGELIST))
    assert "launch codes" not in listing.content.decode()


@pytest.mark.django_db
def test_withheld_text_is_shown_with_the_permission_and_to_superusers(admin_client_: Client, alice: Any) -> None:
    request = with_withheld_text(alice)
    trusted = staff_client("view_responserequest", "view_toolcall", "view_segment", "view_safetyverdict")
    for client in (trusted, admin_client_):
        html = change_page(client, request)
        for text in (*ANSWER_TEXT.values(), "launch codes args", "launch codes output", "launch codes detail"):
            assert text in html, text
        assert log_answers(client, request) == (200, 200, 200)
        assert SECRET in client.get(reverse("admin:responses_app_responserequest_events_sse",
                                            args=[request.pk])).content.decode()


@pytest.mark.django_db
def test_a_request_nothing_was_withheld_of_is_read_with_the_view_permission(alice: Any) -> None:
    request = with_verdicts(alice)  # a retraction: withheld text
    clean = make_request(alice, batches=1)
    services.safety_verdicts_record(request_id=clean.pk, verdicts=[
        {"kind": "input", "mode": "precheck", "text": "Hi", "flagged": False, "action": "passed",
         "checker": "rules", "elapsed_ms": 0.4}])
    auditor = staff_client("view_responserequest")
    assert log_answers(auditor, clean) == (200, 200, 200)
    assert log_answers(auditor, request)[:2] == (403, 403)
    both = auditor.post(reverse(CHANGELIST), {"action": "download_event_logs",
                                              "_selected_action": [clean.pk, request.pk]}, follow=True)
    assert "Nothing was downloaded: 1 of these requests" in both.content.decode()

"""Pages and the JSON API through Django's test client, by persona: owner, teammate (another normal
user), staff and anonymous. Nothing here needs an upstream: starting a runner is recorded, not run."""

from __future__ import annotations

import json
import re
import uuid
from io import StringIO
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from responses_app import markdown, services
from responses_app.models import Checkpoint, Conversation, ResponseRequest
from responses_app.web.pages import FALLBACK_MODELS
from responses_app.web.turns import badge_key

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]


# --- personas and helpers ------------------------------------------------------------------------

def client_for(user: Any, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(user)
    return client


def make_turn(owner: Any, text: str = "Hello **world**", status: str = "completed", prompt: str = "Say hi",
              blocks: list[dict[str, Any]] | None = None) -> ResponseRequest:
    """A request with a committed checkpoint, written directly through the ORM."""
    conversation = services.conversation_create(owner=owner)
    request, _ = services.request_create(owner=owner, input=prompt, model="sim-text",
                                         client_request_id=str(uuid.uuid4()), conversation=conversation)
    ResponseRequest.objects.filter(pk=request.pk).update(status=status)
    view = {
        "revision": 7,
        "meta": {"response_id": "resp_1", "status": "completed" if status == "completed" else "in_progress"},
        "blocks": blocks if blocks is not None else [
            {"id": "o0-c0", "kind": "text", "item_id": "msg_1", "state": "done", "annotations": [], "text": text},
        ],
    }
    Checkpoint.objects.create(request=request, revision=7, sequence_number=12, reason="boundary", view=view,
                              snapshot={})
    request.refresh_from_db()
    return request


def chat_url(request: ResponseRequest) -> str:
    return reverse("responses_app:chat", args=[request.conversation_id])


def hidden_request_id(html: str) -> str:
    match = re.search(r'name="client_request_id" value="([^"]+)"', html)
    assert match, "the form carries a client_request_id"
    return match.group(1)


# --- visibility ------------------------------------------------------------------------------------

def test_anonymous_is_sent_to_login(owner: Any) -> None:
    turn = make_turn(owner)
    for url in (reverse("responses_app:conversations"), chat_url(turn), reverse("responses_app:analytics")):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


def test_login_page_renders_and_logs_in(owner: Any) -> None:
    client = Client()
    assert "Log in" in client.get(reverse("login")).content.decode()
    response = client.post(reverse("login"), {"username": "owner", "password": "pw"})
    assert response.status_code == 302 and response["Location"] == "/"


def test_conversation_list_shows_only_own_conversations(owner: Any, teammate: Any) -> None:
    mine = make_turn(owner, prompt="Owner's question")
    make_turn(teammate, prompt="Teammate's secret")
    html = client_for(owner).get("/").content.decode()
    assert "Owner&#x27;s question" in html or "Owner's question" in html
    assert "secret" not in html
    assert chat_url(mine) in html


def test_empty_conversation_list_explains_itself(teammate: Any) -> None:
    html = client_for(teammate).get("/").content.decode()
    assert "Welcome" in html and "simulator" in html
    assert 'name="input"' in html and 'name="client_request_id"' in html


def test_someone_elses_conversation_is_404(owner: Any, teammate: Any) -> None:
    turn = make_turn(owner)
    assert client_for(teammate).get(chat_url(turn)).status_code == 404
    turn_url = reverse("responses_app:chat-turn", args=[turn.conversation_id, turn.pk])
    assert client_for(teammate).get(turn_url).status_code == 404
    assert client_for(owner).get(turn_url).status_code == 200
    assert client_for(teammate).post(chat_url(turn), {"input": "x", "model": "sim-text"}).status_code == 404


def test_staff_may_read_but_not_post(owner: Any, staff: Any) -> None:
    turn = make_turn(owner, text="Staff can read this")
    client = client_for(staff)
    response = client.get(chat_url(turn))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Staff can read this" in html and "you can read it, not add to it" in html and 'id="composer"' not in html
    assert client.post(chat_url(turn), {"input": "x", "model": "sim-text"}).status_code == 403


def test_unknown_conversation_is_404(owner: Any) -> None:
    assert client_for(owner).get(reverse("responses_app:chat", args=[uuid.uuid4()])).status_code == 404


# --- server rendering --------------------------------------------------------------------------------

def test_committed_text_is_in_the_html_without_javascript(owner: Any) -> None:
    turn = make_turn(owner, text="The river keeps **every drop** in order.", status="streaming")
    html = client_for(owner).get(chat_url(turn)).content.decode()
    assert "The river keeps <strong>every drop</strong> in order." in html
    assert 'data-live="1"' in html, "an in-flight request is marked for chat.js to follow"
    assert "Stop</button>" in html
    assert "<noscript>" in html


def test_completed_turn_is_not_live_and_has_a_badge(owner: Any) -> None:
    turn = make_turn(owner, text="Done.")
    html = client_for(owner).get(chat_url(turn)).content.decode()
    assert 'data-badge="completed"' in html
    assert 'data-live="1"' not in html


def test_markdown_in_model_output_never_injects_html(owner: Any) -> None:
    evil = ('<script>alert("x")</script> <img src=x onerror=alert(1)> '
            '[click](javascript:alert(1)) [ok](https://example.com/a?b=1&c=2) `<b>code</b>`')
    turn = make_turn(owner, text=evil)
    html = client_for(owner).get(chat_url(turn)).content.decode()
    answer = html[html.index("data-blocks"):]
    assert "<script>alert" not in answer
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in answer
    assert "<img src=x" not in answer
    assert 'href="javascript:' not in answer.lower()
    assert "[click](javascript:alert(1))" in answer, "an unsafe link stays visible as text"
    assert '<a href="https://example.com/a?b=1&amp;c=2"' in answer
    assert "<code>&lt;b&gt;code&lt;/b&gt;</code>" in answer


def test_citations_refusal_reasoning_and_tools_render_as_what_they_are(owner: Any) -> None:
    blocks = [
        {"id": "o0", "kind": "tool", "tool": "web_search_call", "state": "completed", "query": "river facts",
         "text": ""},
        {"id": "o1", "kind": "reasoning", "state": "done", "text": "**Planning**\n\nThink first."},
        {"id": "o2-c0", "kind": "text", "state": "done", "text": "Rivers flow.", "annotations": [
            {"type": "url_citation", "url": "https://example.org/rivers", "title": "Rivers <b>101</b>"},
            {"type": "url_citation", "url": "javascript:alert(1)", "title": "evil"},
            {"type": "file_citation", "file_id": "file-1", "filename": "notes.txt", "index": 3},
        ]},
        {"id": "o3-c0", "kind": "refusal", "state": "done", "text": "I can't help with that."},
        {"id": "o4", "kind": "tool", "tool": "function_call", "state": "completed", "name": "get_weather",
         "arguments": '{"location":"Paris"}', "text": ""},
    ]
    turn = make_turn(owner, blocks=blocks)
    html = client_for(owner).get(chat_url(turn)).content.decode()
    assert "Web search: “river facts”" in html
    assert "<summary>Thought</summary>" in html and "<strong>Planning</strong>" in html and "Think first." in html
    assert '<a href="https://example.org/rivers"' in html and "Rivers &lt;b&gt;101&lt;/b&gt;" in html
    assert "javascript:alert" not in html
    assert "notes.txt" in html
    assert "block-refusal" in html and "I can&#x27;t help with that." in html
    assert "Function call get_weather" in html and "&quot;location&quot;: &quot;Paris&quot;" in html


@pytest.mark.parametrize(("status", "view", "expected"), [
    ("pending", None, "queued"),
    ("streaming", {"meta": {"status": "queued"}, "blocks": []}, "queued"),
    ("streaming", {"meta": {"status": "in_progress"}, "blocks": []}, "thinking"),
    ("streaming", {"meta": {}, "blocks": [{"kind": "reasoning", "text": "hm"}]}, "thinking"),
    ("streaming", {"meta": {}, "blocks": [{"kind": "tool", "tool": "web_search_call", "state": "searching"}]},
     "searching"),
    ("streaming", {"meta": {}, "blocks": [{"kind": "tool", "tool": "function_call", "state": "completed"}]},
     "waiting_tool"),
    ("streaming", {"meta": {}, "blocks": [{"kind": "text", "text": "Hi"}]}, "in_progress"),
    ("completed", None, "completed"),
    ("error", None, "error"),  # the relay could not get an answer: not the provider's failure
    ("streaming", {"meta": {"status": "in_progress", "retry": {"status": 429, "attempt": 2, "of": 3}},
                   "blocks": []}, "retrying"),
    ("failed", None, "failed"),
    ("incomplete", None, "incomplete"),
    ("cancelled", None, "cancelled"),
    ("unknown", None, "unknown"),
])
def test_badges_are_honest(status: str, view: dict[str, Any] | None, expected: str) -> None:
    assert badge_key(status, view) == expected


def test_markdown_subset() -> None:
    html = markdown.render_html("# Title\n\nPara *em* and **b**\nline two\n\n- one\n- two\n\n1. a\n2. b\n\n"
                                "```python\nx = '<p>'\n```")
    assert '<h3 class="md-h">Title</h3>' in html
    assert "<p>Para <em>em</em> and <strong>b</strong><br>line two</p>" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html and "<ol><li>a</li><li>b</li></ol>" in html
    assert ('<pre><code class="language-python">x = <span class="hl-s">&#x27;&lt;p&gt;&#x27;</span></code></pre>'
            in html), "escaped, then highlighted"
    assert markdown.render_html("snake_case_name") == "<p>snake_case_name</p>"
    assert "href" not in markdown.render_html("[x](data:text/html,hi) [y](JAVASCRIPT:alert(1))")
    assert 'href="https://a.b/&quot;onclick=&quot;x"' in markdown.render_html('[a](https://a.b/"onclick="x)')


def test_a_title_from_a_prompt_reads_as_plain_text() -> None:
    from responses_app.services import _title_from

    assert _title_from("**Bold** title with `code` and [a link](https://x.org/y)") == "Bold title with code and a link"
    assert _title_from("# Heading _em_\n\n- item") == "Heading em - item"
    assert _title_from("<b>kept</b> & 2*3*4 snake_case") == "<b>kept</b> & 2*3*4 snake_case"  # escaped on display
    assert _title_from("**" + "a" * 80 + "**") == "a" * 57 + "..."


# --- submitting from the page ----------------------------------------------------------------------

def test_form_carries_a_fresh_client_request_id_per_render(owner: Any) -> None:
    turn = make_turn(owner)
    client = client_for(owner)
    first = hidden_request_id(client.get(chat_url(turn)).content.decode())
    second = hidden_request_id(client.get(chat_url(turn)).content.decode())
    assert first != second
    uuid.UUID(first)


def test_chat_form_post_redirects_and_a_resubmit_is_idempotent(owner: Any, no_upstream: list[str]) -> None:
    turn = make_turn(owner)
    client = client_for(owner)
    key = hidden_request_id(client.get(chat_url(turn)).content.decode())
    data = {"input": "Second question", "model": "sim-long", "client_request_id": key,
            "metadata": '{"sim.tokens_per_s": "40"}'}
    first = client.post(chat_url(turn), data)
    second = client.post(chat_url(turn), data)  # a double click, or the browser's resubmit
    assert first.status_code == second.status_code == 302
    assert first["Location"] == second["Location"]
    created = ResponseRequest.objects.filter(owner=owner, client_request_id=key)
    assert created.count() == 1
    request = created.get()
    assert first["Location"] == f"{chat_url(turn)}#turn-{request.pk}"
    assert request.conversation_id == turn.conversation_id
    assert request.params["metadata"] == {"sim.tokens_per_s": "40"}
    assert no_upstream == [str(request.pk), str(request.pk)], "started (single-flight) while still pending"
    html = client.get(chat_url(turn)).content.decode()
    assert "Second question" in html


def test_first_prompt_creates_a_conversation(owner: Any) -> None:
    client = client_for(owner)
    key = hidden_request_id(client.get("/").content.decode())
    response = client.post(reverse("responses_app:conversation-new"), {"input": "Hello relay", "model": "sim-text",
                                                         "client_request_id": key})
    assert response.status_code == 302
    conversation = Conversation.objects.get(owner=owner)
    assert response["Location"].startswith(reverse("responses_app:chat", args=[conversation.pk]))
    assert conversation.title == "Hello relay"
    again = client.post(reverse("responses_app:conversation-new"), {"input": "Hello relay", "model": "sim-text",
                                                      "client_request_id": key})
    assert again["Location"] == response["Location"]
    assert Conversation.objects.filter(owner=owner).count() == 1


def test_invalid_form_shows_field_errors(owner: Any) -> None:
    turn = make_turn(owner)
    client = client_for(owner)
    response = client.post(chat_url(turn), {"input": "  ", "model": "sim-text", "metadata": '{"a": 1}'})
    assert response.status_code == 400
    html = response.content.decode()
    assert "form-errors" in html and "must be a string" in html
    # In words a person reads, each tied to its field; never the field's program name.
    assert "Write a message first." in html and "<strong>input</strong>" not in html
    assert "The metadata (under Advanced) [" in html
    box = r'<textarea id="composer-input"[^>]*aria-describedby="composer-errors [^"]*"[^>]*aria-invalid="true"'
    assert re.search(box, html)
    assert re.search(r'<textarea name="metadata" id="composer-metadata"[^>]*aria-invalid="true"', html)
    assert ResponseRequest.objects.count() == 1
    response = client.post(reverse("responses_app:conversation-new"), {"input": "", "model": "sim-text"})
    assert response.status_code == 400


def test_no_js_stop_cancels_a_pending_request(owner: Any, no_upstream: list[str]) -> None:
    turn = make_turn(owner, status="pending")
    client = client_for(owner)
    url = reverse("responses_app:chat-cancel", args=[turn.conversation_id, turn.pk])
    response = client.post(url)
    assert response.status_code == 302
    turn.refresh_from_db()
    assert turn.status == "cancelled" and turn.cancel_requested
    assert f"cancel:{turn.pk}" in no_upstream


@pytest.mark.parametrize("status", ["pending", "streaming"])
def test_repeated_stops_from_forms_and_the_api_count_one_cancel(owner: Any, no_upstream: list[str],
                                                                status: str) -> None:
    turn = make_turn(owner, status=status)
    client = client_for(owner)
    for _ in range(3):
        client.post(reverse("responses_app:chat-cancel", args=[turn.conversation_id, turn.pk]))
        assert client.post(reverse("responses_app:api-request-cancel", args=[turn.pk])).status_code in (200, 202)
    turn.refresh_from_db()
    assert turn.cancel_requested and turn.cancels == 1
    assert turn.status == ("cancelled" if status == "pending" else "streaming")


def test_model_picker_falls_back_when_upstream_is_unreachable(owner: Any) -> None:
    html = client_for(owner).get("/").content.decode()
    for model in FALLBACK_MODELS[:3]:
        assert f'<option value="{model}"' in html


def test_model_picker_lists_upstream_models_and_never_leaks_the_key(
        owner: Any, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.RELAY_UPSTREAM_BASE_URL = "https://upstream.example/v1"
    settings.RELAY_UPSTREAM_API_KEY = "sk-very-secret"
    seen: dict[str, Any] = {}

    def fake_get(url: str, headers: dict[str, str], timeout: float) -> httpx.Response:
        seen.update(url=url, headers=headers)
        return httpx.Response(200, json={"data": [{"id": "model-a"}, {"id": "model-b"}]},
                              request=httpx.Request("GET", url))

    monkeypatch.setattr("responses_app.web.pages.httpx.get", fake_get)
    html = client_for(owner).get("/").content.decode()
    assert '<option value="model-a"' in html and '<option value="model-b"' in html
    assert seen["url"] == "https://upstream.example/v1/models"
    assert seen["headers"]["authorization"] == "Bearer sk-very-secret"
    assert "sk-very-secret" not in html


# --- the JSON API ---------------------------------------------------------------------------------------

def post_json(client: Client, url: str, body: Any, **extra: Any) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json", **extra)


def test_api_create_is_201_then_200_on_resubmit(owner: Any, no_upstream: list[str]) -> None:
    client = client_for(owner)
    body = {"input": "Hi", "model": "sim-text", "client_request_id": "abc-1", "metadata": {"sim.seed": "1"}}
    first = post_json(client, "/api/requests", body)
    second = post_json(client, "/api/requests", body)
    assert first.status_code == 201 and second.status_code == 200
    assert first.json()["id"] == second.json()["id"]
    assert ResponseRequest.objects.filter(owner=owner).count() == 1
    request_id = first.json()["id"]
    assert no_upstream[0] == request_id
    detail = client.get(f"/api/requests/{request_id}")
    assert detail.status_code == 200 and detail.json()["status"] == "pending"


@pytest.mark.parametrize(("body", "field"), [
    ({"input": "", "model": "sim-text"}, "input"),
    ({"input": "Hi", "model": ""}, "model"),
    ({"input": "Hi", "model": "sim-text", "metadata": {"sim.seed": 7}}, "metadata"),
    ({"input": "Hi", "model": "sim-text", "metadata": ["not", "an", "object"]}, "metadata"),
    ({"input": "Hi", "model": "sim-text", "conversation": "not-a-uuid"}, "conversation"),
])
def test_api_rejects_invalid_input_with_field_messages(owner: Any, body: dict[str, Any], field: str) -> None:
    response = post_json(client_for(owner), "/api/requests", body)
    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert response.json()["errors"][field][0]
    assert ResponseRequest.objects.count() == 0


def test_api_someone_elses_request_is_404(owner: Any, teammate: Any, staff: Any) -> None:
    turn = make_turn(owner, status="streaming")
    assert client_for(teammate).get(f"/api/requests/{turn.pk}").status_code == 404
    assert client_for(teammate).post(f"/api/requests/{turn.pk}/cancel").status_code == 404
    other = post_json(client_for(teammate), "/api/requests",
                      {"input": "Hi", "model": "sim-text", "conversation": str(turn.conversation_id)})
    assert other.status_code == 404 and "conversation" in other.json()["errors"]
    assert client_for(staff).get(f"/api/requests/{turn.pk}").status_code == 200
    assert Client().get(f"/api/requests/{turn.pk}").status_code == 404


def test_csrf_is_enforced_for_session_posts(owner: Any) -> None:
    turn = make_turn(owner)
    client = client_for(owner, enforce_csrf_checks=True)
    body = {"input": "Hi", "model": "sim-text"}
    assert post_json(client, "/api/requests", body).status_code == 403
    assert client.post(chat_url(turn), {"input": "Hi", "model": "sim-text"}).status_code == 403
    assert client.post(reverse("responses_app:chat-cancel", args=[turn.conversation_id, turn.pk])).status_code == 403
    assert ResponseRequest.objects.count() == 1

    html = client.get(chat_url(turn)).content.decode()  # sets the cookie; the form carries the token
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)  # type: ignore[union-attr]
    assert post_json(client, "/api/requests", body, HTTP_X_CSRFTOKEN=token).status_code == 201
    response = client.post(chat_url(turn), {"input": "Hi", "model": "sim-text", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert ResponseRequest.objects.count() == 3


# --- analytics access -------------------------------------------------------------------------------------

def test_analytics_is_for_staff(owner: Any, staff: Any) -> None:
    assert client_for(owner).get(reverse("responses_app:analytics")).status_code == 403
    response = client_for(staff).get(reverse("responses_app:analytics"))
    assert response.status_code == 200
    assert "<svg" in response.content.decode()


# --- bootstrap_demo ----------------------------------------------------------------------------------------

def test_bootstrap_demo_creates_the_demo_account_once(settings: Any) -> None:
    settings.DEVELOPMENT = True
    settings.RELAY_SIMULATOR_BASE_URL = "http://127.0.0.1:8000/simulator/v1"
    out = StringIO()
    call_command("bootstrap_demo", "--address", "http://127.0.0.1:8000/", stdout=out)
    text = out.getvalue()
    assert "http://127.0.0.1:8000/" in text and "'demo'" in text and "Warning" not in text
    user = get_user_model().objects.get(username="demo")
    assert user.check_password("demo")
    call_command("bootstrap_demo", "--address", "http://localhost:8000/", stdout=StringIO())
    assert get_user_model().objects.filter(username="demo").count() == 1


def test_bootstrap_demo_warns_about_a_simulator_address_mismatch(settings: Any) -> None:
    settings.DEVELOPMENT = True
    settings.RELAY_SIMULATOR_BASE_URL = "http://127.0.0.1:8000/simulator/v1"
    out = StringIO()
    call_command("bootstrap_demo", "--address", "http://127.0.0.1:9000/", stdout=out)
    assert "Warning" in out.getvalue() and "SIMULATOR_BASE_URL=http://127.0.0.1:9000/simulator/v1" in out.getvalue()


def test_bootstrap_demo_creates_nothing_outside_development(settings: Any) -> None:
    settings.DEVELOPMENT = False
    out = StringIO()
    call_command("bootstrap_demo", "--address", "http://127.0.0.1:8000/", stdout=out)
    assert not get_user_model().objects.filter(username="demo").exists()
    assert "createsuperuser" in out.getvalue()

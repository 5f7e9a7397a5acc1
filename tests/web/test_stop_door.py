"""Every Stop goes through one door (submission.stop): the no-JS form, the JSON API, the AG-UI and
AI SDK DELETEs, the request socket and the Python API refuse a user who may read but not stop the
request with the same words, and answer an ended request the same way: nothing written, no runner
told. What each path does for a running request: tests/test_permissions.py."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from responses_app import api, submission
from responses_app.models import ResponseRequest
from tests.web.test_permissions import client_for, communicator, first_of, role, stops

Status = ResponseRequest.Status


@pytest.fixture(autouse=True)
def told(no_upstream: list[str]) -> list[str]:
    """The runners told to stop (`cancel:<id>`), whichever path stopped."""
    return no_upstream


@pytest.fixture
def reader(db: Any) -> Any:
    return role("reader", "view_responserequest")


def make_request(owner: Any, status: str) -> ResponseRequest:
    from responses_app import services

    conversation = services.conversation_create(owner=owner, title="Owner's chat")
    request, _ = services.request_create(owner=owner, input="Hi", model="sim-text", client_request_id=status,
                                         conversation=conversation)
    ResponseRequest.objects.filter(pk=request.pk).update(status=status)
    request.refresh_from_db()
    return request


def row(request: ResponseRequest) -> tuple[str, bool, int]:
    return ResponseRequest.objects.values_list("status", "cancel_requested", "cancels").get(pk=request.pk)


@pytest.mark.parametrize("path", ["api", "no-js", "agui", "aisdk"])
def test_every_http_stop_refuses_a_reader_in_the_same_words(owner: Any, reader: Any, told: list[str],
                                                            path: str) -> None:
    live = make_request(owner, Status.STREAMING)
    method, url = stops(live)[path]
    refused = getattr(client_for(reader), method)(url)
    assert refused.status_code == 403, path
    if path != "no-js":  # a page: Django's 403 handler says no more than Forbidden
        assert refused.json()["error"] == submission.STOP_REFUSED, path
    assert row(live) == (Status.STREAMING, False, 0) and told == []


@pytest.mark.django_db(transaction=True)
async def test_the_socket_refuses_a_reader_in_the_same_words(owner: Any, reader: Any, told: list[str]) -> None:
    live = await sync_to_async(make_request)(owner, Status.STREAMING)
    socket = communicator(reader, f"/ws/requests/{live.pk}/?v=2")
    await first_of(socket)
    await socket.send_to(text_data='{"type":"cancel"}')
    assert await socket.receive_json_from(timeout=5) == {"type": "error", "message": submission.STOP_REFUSED}
    await socket.disconnect()
    assert await sync_to_async(row)(live) == (Status.STREAMING, False, 0) and told == []


def test_the_python_api_stops_as_server_code(owner: Any, told: list[str]) -> None:
    """No user: api.cancel is trusted, as api.submit is; it still answers an ended request as ended."""
    live = make_request(owner, Status.STREAMING)
    assert api.cancel(live) is True
    assert row(live) == (Status.STREAMING, True, 1)
    with pytest.raises(submission.Refused) as refused:
        submission.stop_blocking(request=live, user=None)
    assert refused.value.status == 403, "without `trusted`, no user is no permission"


@pytest.mark.parametrize("path", ["api", "agui"])
def test_an_ended_request_is_answered_as_ended_over_json(owner: Any, told: list[str], path: str) -> None:
    done = make_request(owner, Status.COMPLETED)
    method, url = stops(done)[path]
    answer = getattr(client_for(owner), method)(url)
    assert answer.status_code == 200
    assert answer.json() == {"id": str(done.pk), "status": "completed", "cancelled": False}
    assert row(done) == (Status.COMPLETED, False, 0) and told == []


def test_an_ended_request_is_answered_as_ended_everywhere_else(owner: Any, told: list[str]) -> None:
    done = make_request(owner, Status.COMPLETED)
    client = client_for(owner)
    assert client.post(stops(done)["no-js"][1]).status_code == 302, "back to the page, which shows it ended"
    assert client.delete(stops(done)["aisdk"][1]).status_code == 204, "useChat: nothing in flight"
    assert api.cancel(done) is False
    assert row(done) == (Status.COMPLETED, False, 0) and told == []


@pytest.mark.django_db(transaction=True)
async def test_the_socket_answers_an_ended_request_as_ended(owner: Any, told: list[str]) -> None:
    done = await sync_to_async(make_request)(owner, Status.STREAMING)
    socket = communicator(owner, f"/ws/requests/{done.pk}/?v=2")
    await first_of(socket)
    # It ends after the socket read it: the door, not the socket's copy, decides.
    await ResponseRequest.objects.filter(pk=done.pk).aupdate(status=Status.COMPLETED)
    await socket.send_to(text_data='{"type":"cancel"}')
    assert await socket.receive_nothing(timeout=1)
    await socket.disconnect()
    assert await sync_to_async(row)(done) == (Status.COMPLETED, False, 0) and told == []
    assert await api.acancel(done.pk) is False

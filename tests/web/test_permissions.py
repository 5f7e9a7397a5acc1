"""Staff access by permission, end to end, on every page, API, stream and socket that shows or stops
another user's request (`selectors.can_view`, `can_cancel`): staff with no permission get nothing
(404, sockets 4403); `view_responserequest` reads but does not stop (403 over HTTP, an error
message over the socket); `change_responserequest` stops; a superuser does everything; and the
chat page says what the viewer may do. The same through the real server: tests/viewers/test_socket_hardening.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from responses_app import services
from responses_app.models import ResponseRequest
from responses_app.routing import websocket_urlpatterns


@pytest.fixture(autouse=True)
def nothing_runs(no_upstream: list[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Starts and stops are recorded (`cancel:<id>`), on every path that makes them."""
    async def cancel(request_id: str) -> None:
        no_upstream.append(f"cancel:{request_id}")

    async def start(request_id: str) -> None:
        no_upstream.append(request_id)

    monkeypatch.setattr("responses_app.relay.worker.cancel_request", cancel)  # every Stop: submission.stop
    for module in ("responses_app.viewers.request", "responses_app.web.frontend_streams"):
        monkeypatch.setattr(f"{module}.start_request", start)
    return no_upstream


def role(name: str, *codenames: str, superuser: bool = False) -> Any:
    user = get_user_model().objects.create_user(name, is_staff=True, is_superuser=superuser)  # no hashing: fast
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return get_user_model().objects.get(pk=user.pk)  # permissions are cached per instance


@pytest.fixture
def roles(db: Any) -> dict[str, Any]:
    return {"nobody": role("nobody"), "viewer": role("viewer", "view_responserequest"),
            "changer": role("changer", "view_responserequest", "change_responserequest"),
            "root": role("root", superuser=True)}


@pytest.fixture
def live(owner: Any) -> ResponseRequest:
    """The owner's request, streaming (its runner elsewhere)."""
    conversation = services.conversation_create(owner=owner, title="Owner's chat")
    request, _ = services.request_create(owner=owner, input="Hi", model="sim-text", client_request_id="live",
                                         conversation=conversation)
    ResponseRequest.objects.filter(pk=request.pk).update(status=ResponseRequest.Status.STREAMING)
    request.refresh_from_db()
    return request


def client_for(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def urls(request: ResponseRequest) -> dict[str, str]:
    conversation, pk = request.conversation_id, request.pk
    return {
        "chat": reverse("responses_app:chat", args=[conversation]),
        "turn": reverse("responses_app:chat-turn", args=[conversation, pk]),
        "api": reverse("responses_app:api-request", args=[pk]),
        "agui": reverse("responses_app:agui-stream", args=[pk]),
    }


def stops(request: ResponseRequest) -> dict[str, tuple[str, str]]:
    """Every HTTP Stop of the request: (method, url)."""
    return {
        "api": ("post", reverse("responses_app:api-request-cancel", args=[request.pk])),
        "no-js": ("post", reverse("responses_app:chat-cancel", args=[request.conversation_id, request.pk])),
        "agui": ("delete", reverse("responses_app:agui-stream", args=[request.pk])),
        "aisdk": ("delete", reverse("responses_app:aisdk-stream", args=[request.pk])),
    }


def cancel_requested(request: ResponseRequest) -> bool:
    return ResponseRequest.objects.filter(pk=request.pk, cancel_requested=True).exists()


def test_staff_without_permissions_see_nothing(roles: dict[str, Any], live: ResponseRequest) -> None:
    client = client_for(roles["nobody"])
    for name, url in urls(live).items():
        assert client.get(url).status_code == 404, name
    for name, (method, url) in stops(live).items():
        assert getattr(client, method)(url).status_code in (404, 204), name  # 204: nothing in flight of theirs
    assert not cancel_requested(live)


def test_the_view_permission_reads_but_does_not_stop(roles: dict[str, Any], live: ResponseRequest) -> None:
    client = client_for(roles["viewer"])
    for name, url in urls(live).items():
        assert client.get(url).status_code == 200, name  # the AG-UI stream: its head (its body never starts)
    for name, (method, url) in stops(live).items():
        refused = getattr(client, method)(url)
        assert refused.status_code == 403, name
    assert not cancel_requested(live)
    page = client.get(urls(live)["chat"]).content.decode()
    assert "you can read it, not add to it" in page
    assert "stop its answers" not in page and stops(live)["no-js"][1] not in page, "no Stop offered"
    assert 'name="input"' not in page, "no composer"


@pytest.mark.parametrize("stop", ["api", "no-js", "agui", "aisdk"])
@pytest.mark.parametrize("who", ["changer", "root"])
def test_the_change_permission_and_superusers_stop(roles: dict[str, Any], live: ResponseRequest, who: str,
                                                   stop: str) -> None:
    client = client_for(roles[who])
    page = client.get(urls(live)["chat"]).content.decode()
    assert "you can read it and stop its answers, not add to it" in page
    assert f'action="{stops(live)["no-js"][1]}"' in page, "Stop is offered"
    method, url = stops(live)[stop]
    assert getattr(client, method)(url).status_code in (202, 302)
    assert cancel_requested(live)


def test_the_owner_is_told_nothing_and_may_do_everything(owner: Any, live: ResponseRequest) -> None:
    page = client_for(owner).get(urls(live)["chat"]).content.decode()
    assert "data-viewer-rights" not in page and 'name="input"' in page


def communicator(user: Any, path: str) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    socket.scope["user"] = user
    return socket


async def closed_with(socket: WebsocketCommunicator) -> int:
    assert (await socket.connect())[0]
    while (message := await socket.receive_output(timeout=5))["type"] != "websocket.close":
        pass
    return int(message["code"])


async def first_of(socket: WebsocketCommunicator) -> dict[str, Any]:
    assert (await socket.connect())[0]
    return await socket.receive_json_from(timeout=5)  # type: ignore[no-any-return]


@pytest.mark.django_db(transaction=True)
async def test_the_sockets_follow_the_same_rules(roles: dict[str, Any], live: ResponseRequest) -> None:
    request_path = f"/ws/requests/{live.pk}/?v=2"
    conversation_path = f"/ws/conversations/{live.conversation_id}/"
    for path in (request_path, conversation_path):
        assert await closed_with(communicator(roles["nobody"], path)) == 4403, path
    assert (await first_of(communicator(roles["viewer"], conversation_path)))["type"] == "turns"
    viewer = communicator(roles["viewer"], request_path)
    assert (await first_of(viewer))["type"] == "snapshot"
    for _ in range(2):
        await viewer.send_to(text_data='{"type":"cancel"}')
        refused = await viewer.receive_json_from(timeout=5)
        assert refused["type"] == "error" and "change_responserequest" in refused["message"]
    assert not await sync_to_async(cancel_requested)(live)
    await viewer.disconnect()
    changer = communicator(roles["changer"], request_path)
    await first_of(changer)
    await changer.send_to(text_data='{"type":"cancel"}')
    assert await changer.receive_nothing(timeout=1)
    assert await sync_to_async(cancel_requested)(live)
    await changer.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_permission_revoked_after_connect_is_read_at_the_stop(roles: dict[str, Any],
                                                                      live: ResponseRequest) -> None:
    socket = communicator(roles["changer"], f"/ws/requests/{live.pk}/?v=2")
    await first_of(socket)
    await sync_to_async(roles["changer"].user_permissions.remove)(
        await Permission.objects.aget(codename="change_responserequest"))
    await socket.send_to(text_data='{"type":"cancel"}')
    assert (await socket.receive_json_from(timeout=5))["type"] == "error"
    assert not await sync_to_async(cancel_requested)(live)
    await socket.disconnect()


def test_an_unknown_request_is_404_for_everyone(roles: dict[str, Any]) -> None:
    missing = uuid.uuid4()
    for user in roles.values():
        assert client_for(user).get(reverse("responses_app:api-request", args=[missing])).status_code == 404

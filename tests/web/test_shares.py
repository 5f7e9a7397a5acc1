"""Share a live answer: read-only links to a conversation or one turn, who they admit (signed-in
people, or anyone when the owner chose so and RELAY_SHARE_ANONYMOUS allows it), the link's own
sockets (read only, counted as viewer connections of the owner's request, never as a request),
and revocation closing them at once. Personas: the owner, a teammate, staff, an anonymous visitor.
No upstream: starting a runner is recorded, not run."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.test import Client
from django.urls import reverse

from responses_app import selectors, shares
from responses_app.models import ResponseRequest, Share
from responses_app.routing import websocket_urlpatterns
from responses_app.streaming.wire import PROTOCOL
from tests.web.test_pages import client_for, make_turn

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_upstream")]


def create(client: Client, on: ResponseRequest, **data: str) -> dict[str, Any]:
    response = client.post(reverse("responses_app:share-create", args=[on.conversation_id]), data,
                           HTTP_ACCEPT="application/json")
    assert response.status_code == 201, response.content
    return dict(response.json())


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def token_of(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[1]


# --- links and the pages they open ---------------------------------------------------------------------

def test_a_signed_in_person_with_the_link_reads_the_conversation_and_cannot_act(owner: Any, teammate: Any) -> None:
    turn = make_turn(owner, text="The **river** answer")
    link = create(client_for(owner), turn)
    assert not link["anonymous"]
    page = client_for(teammate).get(path_of(link["url"]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "The <strong>river</strong> answer" in html and f'id="turn-{turn.pk}"' in html
    for control in ('id="composer"', "Regenerate", "data-action=\"edit\"", 'class="stop"', "Share and export"):
        assert control not in html, control
    token = token_of(link["url"])
    assert f"/ws/shares/{token}/requests/{{request}}/" in html, "the script follows through the link's sockets"
    assert f"/s/{token}/turns/{turn.pk}/" in html, "a finished answer is fetched through the link"
    assert Client().get(path_of(link["url"])).status_code == 302, "no account: sign in first"


def test_a_link_to_one_turn_shows_that_turn_only(owner: Any, teammate: Any) -> None:
    first = make_turn(owner, prompt="First")
    second, _ = ResponseRequest.objects.get_or_create(
        owner=owner, conversation=first.conversation, client_request_id="second",
        defaults={"input": "Second", "model": "sim-text", "parent": first})
    link = create(client_for(owner), first, turn=str(second.pk))
    html = client_for(teammate).get(path_of(link["url"])).content.decode()
    assert f'id="turn-{second.pk}"' in html and f'id="turn-{first.pk}"' not in html
    assert 'data-conversation=' not in html, "no conversation socket for one turn"
    token = token_of(link["url"])
    teammate_client = client_for(teammate)
    assert teammate_client.get(reverse("responses_app:shared-turn", args=[token, second.pk])).status_code == 200
    assert teammate_client.get(reverse("responses_app:shared-turn", args=[token, first.pk])).status_code == 404
    other = make_turn(owner)
    assert client_for(owner).post(reverse("responses_app:share-create", args=[first.conversation_id]),
                                  {"turn": str(other.pk)}).status_code == 400, "a turn of another conversation"


def test_only_the_owner_makes_and_revokes_links(owner: Any, teammate: Any, staff: Any) -> None:
    turn = make_turn(owner)
    url = reverse("responses_app:share-create", args=[turn.conversation_id])
    assert client_for(teammate).post(url).status_code == 404
    assert client_for(staff).post(url).status_code == 403
    link = create(client_for(owner), turn)
    share = Share.objects.get(pk=link["id"])
    revoke = reverse("responses_app:share-revoke", args=[turn.conversation_id, share.pk])
    assert client_for(teammate).post(revoke).status_code == 404
    assert client_for(staff).post(revoke).status_code == 403
    assert client_for(teammate).get(path_of(link["url"])).status_code == 200
    response = client_for(owner).post(revoke)
    assert response.status_code == 302 and "tools=open" in response["Location"]
    assert client_for(teammate).get(path_of(link["url"])).status_code == 404, "revoked: gone at once"
    assert client_for(owner).get(path_of(link["url"])).status_code == 404


def test_the_owner_s_panel_lists_the_links_still_working(owner: Any) -> None:
    turn = make_turn(owner)
    kept = create(client_for(owner), turn)
    gone = create(client_for(owner), turn)
    client_for(owner).post(reverse("responses_app:share-revoke", args=[turn.conversation_id, gone["id"]]))
    html = client_for(owner).get(reverse("responses_app:chat", args=[turn.conversation_id]) + "?tools=open"
                                 ).content.decode()
    assert kept["url"] in html and gone["url"] not in html
    assert 'id="conversation-tools" open' in html and "anyone with the link" not in html, "the setting is off"


def test_anonymous_links_only_where_the_setting_allows(owner: Any, settings: Any) -> None:
    turn = make_turn(owner)
    url = reverse("responses_app:share-create", args=[turn.conversation_id])
    assert client_for(owner).post(url, {"anonymous": "1"}).status_code == 400, "off by default"
    settings.RELAY_SHARE_ANONYMOUS = True
    assert "anyone with the link" in client_for(owner).get(
        reverse("responses_app:chat", args=[turn.conversation_id])).content.decode()
    link = create(client_for(owner), turn, anonymous="1")
    assert link["anonymous"] and Client().get(path_of(link["url"])).status_code == 200
    signed_in_only = create(client_for(owner), turn)
    assert Client().get(path_of(signed_in_only["url"])).status_code == 302
    settings.RELAY_SHARE_ANONYMOUS = False
    assert Client().get(path_of(link["url"])).status_code == 302, "the setting turned off closes them"


def test_a_deleted_conversation_s_links_stop_working(owner: Any, teammate: Any) -> None:
    turn = make_turn(owner)
    link = create(client_for(owner), turn)
    client_for(owner).post(reverse("responses_app:conversation-delete", args=[turn.conversation_id]))
    assert client_for(teammate).get(path_of(link["url"])).status_code == 404


def test_the_access_rule_is_one_function(owner: Any, teammate: Any, settings: Any) -> None:
    turn = make_turn(owner)
    share = shares.share_create(conversation=turn.conversation, user=owner)  # type: ignore[arg-type]
    assert selectors.request_for_viewer(user=teammate, request_id=turn.pk) is None, "not without the link"
    assert selectors.request_for_viewer(user=teammate, request_id=turn.pk, share=share.token) == turn
    assert selectors.request_for_viewer(user=teammate, request_id=turn.pk, share="not-a-token") is None
    assert selectors.request_for_viewer(user=AnonymousUser(), request_id=turn.pk, share=share.token) is None
    other = make_turn(owner)
    assert selectors.request_for_viewer(user=teammate, request_id=other.pk, share=share.token) is None
    assert selectors.request_for_viewer(user=teammate, request_id="nonsense", share=share.token) is None
    with pytest.raises(PermissionError):
        shares.share_create(conversation=turn.conversation, user=teammate)  # type: ignore[arg-type]
    assert shares.share_revoke(share=share) and not shares.share_revoke(share=share), "revoked once"


# --- the link's sockets --------------------------------------------------------------------------------

@sync_to_async
def share_of(turn: ResponseRequest, **options: Any) -> Share:
    return shares.share_create(conversation=turn.conversation, user=turn.owner, **options)  # type: ignore[arg-type]


async def open_socket(user: Any, path: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def closed_with(communicator: WebsocketCommunicator, timeout: float = 2) -> int:
    while True:
        message = await communicator.receive_output(timeout=timeout)
        if message["type"] == "websocket.close":
            return int(message["code"])


@pytest.mark.django_db(transaction=True)
async def test_revoking_closes_the_link_s_sockets_at_once(owner: Any, teammate: Any) -> None:
    turn = await sync_to_async(make_turn)(owner, status="streaming")
    share = await share_of(turn)
    viewer = await open_socket(teammate, f"/ws/shares/{share.token}/requests/{turn.pk}/?v={PROTOCOL}")
    snapshot = json.loads(await viewer.receive_from(timeout=5))
    assert snapshot["type"] == "snapshot" and snapshot["view"]["revision"] == 7
    tab = await open_socket(teammate, f"/ws/shares/{share.token}/conversations/{turn.conversation_id}/")
    assert json.loads(await tab.receive_from(timeout=5)) == {"type": "turns", "ids": [str(turn.pk)]}
    await viewer.send_to(text_data='{"type":"cancel"}')  # read only: a viewer cannot stop it
    await viewer.send_to(text_data='{"type":"ping"}')
    assert json.loads(await viewer.receive_from(timeout=5))["type"] == "error"
    assert json.loads(await viewer.receive_from(timeout=5)) == {"type": "pong"}
    saved = await sync_to_async(ResponseRequest.objects.get)(pk=turn.pk)
    assert not saved.cancel_requested and saved.cancels == 0
    assert saved.viewer_connections == 1, "a viewer connection of the owner's request"
    assert await sync_to_async(ResponseRequest.objects.count)() == 1, "never a request of the viewer's"
    assert await sync_to_async(shares.share_revoke)(share=share)
    await shares.close_sockets(share.token)
    assert await closed_with(viewer) == 4403
    assert await closed_with(tab) == 4403
    again = await open_socket(teammate, f"/ws/shares/{share.token}/requests/{turn.pk}/?v={PROTOCOL}")
    assert await closed_with(again) == 4403


@pytest.mark.django_db(transaction=True)
async def test_the_link_admits_only_what_it_shares(owner: Any, teammate: Any, settings: Any) -> None:
    turn = await sync_to_async(make_turn)(owner)
    one = await share_of(turn, request=turn)
    plain = await open_socket(teammate, f"/ws/requests/{turn.pk}/?v={PROTOCOL}")
    assert await closed_with(plain) == 4403, "without the link, as before"
    conversation = await open_socket(teammate, f"/ws/shares/{one.token}/conversations/{turn.conversation_id}/")
    assert await closed_with(conversation) == 4403, "a link to one turn opens no conversation socket"
    anonymous = await open_socket(AnonymousUser(), f"/ws/shares/{one.token}/requests/{turn.pk}/?v={PROTOCOL}")
    assert await closed_with(anonymous) == 4403, "signed-in people only"
    settings.RELAY_SHARE_ANONYMOUS = True
    anyone = await share_of(turn, anonymous=True)
    viewer = await open_socket(AnonymousUser(), f"/ws/shares/{anyone.token}/requests/{turn.pk}/?v={PROTOCOL}")
    assert json.loads(await viewer.receive_from(timeout=5))["type"] == "snapshot"
    assert json.loads(await viewer.receive_from(timeout=5))["type"] == "terminal"
    await viewer.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_viewer_who_may_not_stop_an_answer_cannot_over_the_socket(owner: Any, staff: Any) -> None:
    turn = await sync_to_async(make_turn)(owner, status="streaming")
    auditor = await open_socket(staff, f"/ws/requests/{turn.pk}/?v={PROTOCOL}")  # may read, not stop
    assert json.loads(await auditor.receive_from(timeout=5))["type"] == "snapshot"
    await auditor.send_to(text_data='{"type":"cancel"}')
    await auditor.send_to(text_data='{"type":"ping"}')
    assert json.loads(await auditor.receive_from(timeout=5))["type"] == "error"
    assert json.loads(await auditor.receive_from(timeout=5)) == {"type": "pong"}
    assert not (await sync_to_async(ResponseRequest.objects.get)(pk=turn.pk)).cancel_requested
    await auditor.disconnect()
    mine = await open_socket(owner, f"/ws/requests/{turn.pk}/?v={PROTOCOL}")
    assert json.loads(await mine.receive_from(timeout=5))["type"] == "snapshot"
    await mine.send_to(text_data='{"type":"cancel"}')
    await mine.send_to(text_data='{"type":"ping"}')
    assert json.loads(await mine.receive_from(timeout=5)) == {"type": "pong"}
    assert (await sync_to_async(ResponseRequest.objects.get)(pk=turn.pk)).cancel_requested, "the owner can"
    await mine.disconnect()


def test_shared_link_ids_are_unguessable(owner: Any) -> None:
    turn = make_turn(owner)
    tokens = {shares.share_create(conversation=turn.conversation, user=owner).token  # type: ignore[arg-type]
              for _ in range(20)}
    assert len(tokens) == 20 and all(len(t) >= 32 for t in tokens)
    assert uuid.UUID(str(Share.objects.first().pk))  # type: ignore[union-attr]

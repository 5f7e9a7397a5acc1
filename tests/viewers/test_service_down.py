"""A socket whose channel layer fails under it (Redis restarting) is closed 1013, try again later,
with one warning line: not an HTTP 500 with a traceback per connect (410 of them in one web
process's log during a 2-second Redis restart of the chaos run), and nothing of it is left."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer

from responses_app.relay.hub import get_hub
from responses_app.viewers import guard
from tests.relay.helpers import connect, make_request

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("relay_settings")]


def sockets_receive_raise(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """The sockets' own channels fail with `error`; the process's runner (its other channels) goes on."""
    receive = InMemoryChannelLayer.receive

    async def failing(self: Any, channel: str) -> Any:
        if not channel.startswith("specific."):
            return await receive(self, channel)
        raise error

    monkeypatch.setattr(InMemoryChannelLayer, "receive", failing)


async def test_a_channel_layer_down_closes_the_socket_1013(owner: Any, monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    request = await make_request(owner)
    sockets_receive_raise(monkeypatch, ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 6379)"))
    communicator = await connect(owner, request.pk)
    with caplog.at_level(logging.WARNING, logger="responses_app.viewers.guard"):
        connected, _ = await communicator.connect()
        assert connected, "accepted, then closed with a code a page understands (not a bare HTTP 500)"
        while (message := await communicator.receive_output(timeout=5))["type"] != "websocket.close":
            assert message["type"] == "websocket.send"
    assert message["code"] == guard.CLOSE_TRY_AGAIN
    [record] = [r for r in caplog.records if "closed 1013" in r.getMessage()]
    assert record.exc_info is None and "ConnectionRefusedError" in record.getMessage()
    assert not guard._open, "nothing of the socket is kept"
    assert not get_hub().viewers.get(str(request.pk))


async def test_a_bug_is_not_taken_for_a_service_down(owner: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    request = await make_request(owner)
    sockets_receive_raise(monkeypatch, KeyError("a bug"))
    communicator = await connect(owner, request.pk)
    await communicator.connect()
    with pytest.raises(KeyError):  # the server's to log, with its traceback
        await asyncio.wait_for(communicator.future, 5)


async def test_a_client_gone_mid_send_is_let_go_quietly(owner: Any, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """uvicorn raises ClientDisconnected (an OSError) into a send to a client that left (one that
    gave up on its handshake, or moved to another process): no warning, no close to send, and what
    the socket joined is released all the same (it was left attached before)."""
    from uvicorn.protocols.utils import ClientDisconnected

    request = await make_request(owner)
    sockets_receive_raise(monkeypatch, ClientDisconnected())
    communicator = await connect(owner, request.pk)
    with caplog.at_level(logging.DEBUG, logger="responses_app.viewers.guard"):
        await communicator.connect()
        await asyncio.wait_for(communicator.future, 5)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith(
        ("responses_app.viewers", "uvicorn", "django.channels"))]
    assert not guard._open and not get_hub().viewers.get(str(request.pk))

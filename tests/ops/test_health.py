"""/healthz: 200 when the database and the channel layer answer, 503 naming the part that does
not; no login needed and nothing written (no session, no cookie)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from channels.layers import channel_layers
from django.contrib.sessions.models import Session
from django.test import AsyncClient

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fresh_layers() -> Any:
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


async def test_healthy(fresh_layers: Any) -> None:
    response = await AsyncClient().get("/healthz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok" and body["database"]["ok"] and body["channel_layer"]["ok"]
    assert response["Cache-Control"] == "no-store" and not response.cookies
    assert not await Session.objects.aexists()


async def test_unreachable_channel_layer_is_503(settings: Any, fresh_layers: Any) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [f"redis://127.0.0.1:{port}/0"]}}}
    response = await AsyncClient().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["database"]["ok"]
    assert not body["channel_layer"]["ok"] and "Connect" in body["channel_layer"]["error"]


async def test_only_safe_methods() -> None:
    assert (await AsyncClient().post("/healthz")).status_code == 405


async def test_a_probe_of_the_process_port_is_not_redirected_to_https(settings: Any, fresh_layers: Any) -> None:
    settings.SECURE_SSL_REDIRECT = True  # as in production: a probe of 127.0.0.1:8001 is plain HTTP, no proxy
    assert (await AsyncClient().get("/healthz")).status_code == 200
    assert (await AsyncClient().get("/accounts/login/")).status_code == 301, "other pages still are"

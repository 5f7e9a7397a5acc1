"""The private APIs responses_app/compat.py reaches into still exist in the installed versions. Each
test names the reach-in and the upgrade that broke it, so a new httpx, httpx-aiohttp, Channels or
Django fails here, loudly, instead of quietly costing CPU (or, for the demo's handler, at start)."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest
from channels.sessions import InstanceSessionWrapper
from django.core.handlers.asgi import ASGIHandler
from httpx_aiohttp.transport import AiohttpResponseStream

from responses_app import compat
from responses_app.simulator.auth import DEV_API_KEY
from responses_app.upstream.http import Upstream

pytestmark = pytest.mark.usefixtures("relay_settings")


def versions(*packages: str) -> str:
    return ", ".join(f"{p} {importlib.metadata.version(p)}" for p in packages)


async def test_httpx_aiohttp_still_carries_its_aiohttp_response(simulator_url: str) -> None:
    upstream = Upstream(base=simulator_url, api_key=DEV_API_KEY)
    try:
        async with upstream.create_stream({"model": "sim-text", "input": "Hi", "metadata": {"sim.seed": "1"}}) as got:
            inner = getattr(got.stream, "_stream", None)
            assert isinstance(inner, AiohttpResponseStream), (
                f"httpx's Response.stream no longer wraps the transport's stream as `_stream` "
                f"({versions('httpx', 'httpx-aiohttp')}): compat.aiohttp_content falls back to aiter_bytes")
            assert hasattr(inner, "_aiohttp_response"), (
                f"httpx-aiohttp's AiohttpResponseStream has no `_aiohttp_response` any more "
                f"({versions('httpx-aiohttp')}): compat.aiohttp_content falls back to aiter_bytes")
            assert compat.aiohttp_content(got) is inner._aiohttp_response.content
            await got.aread()
    finally:
        await upstream.aclose()


def test_channels_session_wrapper_still_has_what_frames_skip() -> None:
    async def inner(message: dict[str, Any]) -> None:
        pass

    wrapper = InstanceSessionWrapper({"type": "websocket", "cookies": {}}, inner)
    for name in ("real_send", "save_message_types", "send"):
        assert hasattr(wrapper, name), (
            f"channels.sessions.InstanceSessionWrapper has no `{name}` any more ({versions('channels')}): "
            "compat.past_session_wrapper no longer skips it")
    assert "websocket.send" not in wrapper.save_message_types, (
        f"Channels now saves the session on websocket frames ({versions('channels')}): skipping it would be wrong")
    assert compat.past_session_wrapper(wrapper.send) is inner


def test_django_still_builds_a_middleware_chain_the_demo_replaces(settings: Any) -> None:
    handler = ASGIHandler()  # loads the middleware (async), as a host's handler does
    handler.load_middleware(is_async=False)
    assert callable(getattr(handler, "_middleware_chain", None)), (
        f"Django's BaseHandler has no `_middleware_chain` any more ({versions('django')}): "
        "compat.enter_middleware_once (the demo's project/handler.py only) must change")
    compat.enter_middleware_once(handler)
    assert handler._middleware_chain.__class__.__name__ == "SyncToAsync"

"""Every reach-in to another package's private API, in this one module, and nowhere else.

Each one below names what it touches, why, the versions it was checked against, and what happens
if an upgrade removes it. tests/app/test_compat.py fails with a message naming the reach-in when the
private attribute is gone, so an upgrade breaks loudly there rather than quietly here.

1. `aiohttp_content(response)`: httpx's `Response.stream._stream` (the transport's stream inside
   httpx's private `BoundAsyncStream`) and httpx-aiohttp's `AiohttpResponseStream._aiohttp_response`,
   to read aiohttp's `StreamReader` straight, without httpx's iterator stack per chunk (the default
   SSE transport's CPU per event, bench/README.md). Checked against httpx 0.28.1, httpx-aiohttp 0.2.0,
   aiohttp 3.14. If gone: None, and upstream.py reads httpx's `aiter_bytes` (the same bytes, more CPU).
2. `past_session_wrapper(send)`: Channels' `channels.sessions.InstanceSessionWrapper` (not in
   Channels' documented API), its `real_send` and `save_message_types`: a socket's frames skip a
   wrapper that does nothing for them but read the lazy session twice per frame. Checked against
   channels 4.3.2. If gone: the frames go through the wrapper (the same frames, more CPU).
3. `enter_middleware_once(handler)`: Django's `BaseHandler._middleware_chain`, replaced after
   `load_middleware` so the whole chain runs in one worker thread per request. Used by the demo's
   own handler (project/handler.py) only: a host does not need it, and the app never calls it.
   Checked against Django 5.2 and 6.1. If gone: AttributeError when the demo's handler is built.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from channels.sessions import InstanceSessionWrapper
from httpx_aiohttp.transport import AiohttpResponseStream

Send = Callable[[dict[str, Any]], Awaitable[None]]


def aiohttp_content(response: httpx.Response) -> Any | None:
    """aiohttp's StreamReader under a response the aiohttp transport carries; None otherwise."""
    transport_stream = getattr(response.stream, "_stream", None)  # httpx's BoundAsyncStream wraps it
    if not isinstance(transport_stream, AiohttpResponseStream):
        return None
    aiohttp_response = getattr(transport_stream, "_aiohttp_response", None)
    return None if aiohttp_response is None else aiohttp_response.content


def past_session_wrapper(send: Send) -> Send:
    """`send` past every Channels session wrapper that saves nothing on a websocket frame (it saves
    the session only on the message types in its `save_message_types`)."""
    wrapper = getattr(send, "__self__", None)
    while isinstance(wrapper, InstanceSessionWrapper) and getattr(send, "__func__", None) is \
            InstanceSessionWrapper.send and "websocket.send" not in wrapper.save_message_types:
        send = wrapper.real_send
        wrapper = getattr(send, "__self__", None)
    return send


def enter_middleware_once(handler: Any) -> None:
    """After `handler.load_middleware(is_async=False)`: the sync chain entered once per request,
    in the request's thread-sensitive thread (the demo's handler, project/handler.py)."""
    chain: Any = getattr(handler, "_middleware_chain")  # noqa: B009 - Django's private attribute, untyped
    handler._middleware_chain = sync_to_async(chain, thread_sensitive=True)

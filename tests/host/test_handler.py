"""The HTTP handler the project serves (project.handler): the middleware chain entered once per
request, in one worker thread, with every middleware still acting. That an async view
still runs on the event loop (where the hub and its runners live) is tests/relay/test_start.py's."""

from __future__ import annotations

import concurrent.futures
import json
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.core.asgi import get_asgi_application as django_asgi_application
from django.test import AsyncClient

from project.handler import get_asgi_application

pytestmark = pytest.mark.django_db(transaction=True)


async def _get(app: Any, path: str, **kwargs: Any) -> tuple[httpx.Response, int]:
    """One request through `app`; the thread-pool hand-offs it took."""
    submits = 0
    submit = concurrent.futures.ThreadPoolExecutor.submit

    def counting(self: Any, *args: Any, **kw: Any) -> Any:
        nonlocal submits
        submits += 1
        return submit(self, *args, **kw)

    concurrent.futures.ThreadPoolExecutor.submit = counting  # type: ignore[method-assign]
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=("127.0.0.1", 40000)),
                                     base_url="http://localhost", **kwargs) as http:
            response = await http.get(path)
    finally:
        concurrent.futures.ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]
    return response, submits


async def test_a_request_crosses_to_a_thread_a_few_times_not_twice_per_middleware(settings: Any) -> None:
    settings.RELAY_INPROCESS_RUNNER = False  # the handler's own hops, not those of a runner it would start
    ours, ours_submits = await _get(get_asgi_application(), "/metrics")
    stock, stock_submits = await _get(django_asgi_application(), "/metrics")
    assert ours.status_code == stock.status_code == 200
    assert ours.headers["cache-control"] == "no-store"
    # The stock handler: a hop per process_request and per process_response of every middleware.
    assert stock_submits >= 15, stock_submits
    # Ours: the chain once, the request_started and request_finished signals.
    assert ours_submits <= 4, ours_submits


async def test_every_middleware_still_acts(owner: Any) -> None:
    app = get_asgi_application()
    page, _ = await _get(app, "/")  # authentication: a login-required page redirects
    assert page.status_code == 302 and "/accounts/login/" in page.headers["location"]
    login, _ = await _get(app, "/accounts/login/")  # security, CSP, clickjacking headers, the CSRF cookie
    assert login.status_code == 200
    assert login.headers["x-frame-options"] == "DENY"
    assert "default-src 'self'" in login.headers["content-security-policy"]
    assert login.headers["x-content-type-options"] == "nosniff"
    assert "csrftoken" in login.cookies

    client = AsyncClient()
    await sync_to_async(client.force_login)(owner)
    session = client.cookies["sessionid"].value
    signed_in, _ = await _get(app, "/", cookies={"sessionid": session})  # the session, read in the chain
    assert signed_in.status_code == 200

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost",
                                 cookies={"sessionid": session}) as http:
        refused = await http.post("/api/requests", content=json.dumps({"input": "Hi"}),
                                  headers={"content-type": "application/json"})
    assert refused.status_code == 403  # CSRF's process_view: no token, no request


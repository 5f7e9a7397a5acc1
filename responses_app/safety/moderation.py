"""The `moderation` checker: the provider's `POST /v1/moderations`, at the base URL and with the key
of the Responses calls (the embedded simulator in-process when no base URL is set).

Context: the endpoint says whether a text is flagged, not where, so the check sends `context + text`.
That meets the checker contract (never flag what lies wholly inside `context`) because the context was
judged before, with its own context, and passed: had it been flagged, the request would have stopped
there. The one exception is a window let through by `fail_open` after a checker error: its phrase is
caught by the next window, late rather than never.

One client per process and event loop, with at most RELAY_SAFETY_MAX_CONNECTIONS connections; its
HTTP timeout is RELAY_SAFETY_TIMEOUT_MS, a backstop behind `judge()`'s own.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson

from ..conf import app_settings
from ..simulator.inprocess import ASGIStreamTransport
from ..upstream.embedded import EMBEDDED_BASE_URL, simulator_app
from ..upstream.http import UpstreamHTTPError, auth_headers, base_url
from .checkers import Kind, Verdict


class ModerationChecker:
    name = "moderation"

    def __init__(self, *, model: str, base: str | None = None, headers: dict[str, str] | None = None,
                 max_connections: int = 10, timeout: float = 2.0) -> None:
        self.model = model
        self.base = (base or base_url()).rstrip("/")
        self.headers = auth_headers() if headers is None else headers
        self.max_connections = max_connections
        self.timeout = timeout
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def client(self) -> httpx.AsyncClient:
        """The shared client of the running loop (a client's pooled connections belong to one loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            if self.base == EMBEDDED_BASE_URL:
                transport: httpx.AsyncBaseTransport = ASGIStreamTransport(simulator_app())
            else:
                limits = httpx.Limits(max_connections=self.max_connections,
                                      max_keepalive_connections=self.max_connections)
                transport = httpx.AsyncHTTPTransport(limits=limits)
            self._client = httpx.AsyncClient(transport=transport, headers=self.headers,
                                             timeout=httpx.Timeout(self.timeout))
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = self._loop = None

    async def check(self, text: str, *, context: str = "", kind: Kind = "output") -> Verdict:
        response = await self.client().post(
            f"{self.base}/moderations", content=orjson.dumps({"model": self.model, "input": context + text}),
            headers={"content-type": "application/json", "accept": "application/json"})
        if response.status_code >= 400:
            raise UpstreamHTTPError(response.status_code, response.content, None)
        return verdict_from(orjson.loads(response.content), checker=self.name)


def verdict_from(data: Any, *, checker: str) -> Verdict:
    """The API's answer as a Verdict: `results[0].flagged`, and the categories that are true."""
    try:
        result = data["results"][0]
        flagged = result["flagged"]
        categories = result.get("categories") or {}
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"not a moderation result: {str(data)[:200]}") from exc
    if not isinstance(flagged, bool) or not isinstance(categories, dict):
        raise ValueError(f"not a moderation result: {str(data)[:200]}")
    return Verdict(flagged=flagged, checker=checker,
                   categories=tuple(sorted(name for name, hit in categories.items() if hit is True)))


def moderation_checker() -> ModerationChecker:
    return ModerationChecker(model=app_settings.SAFETY_MODERATION_MODEL,
                             max_connections=app_settings.SAFETY_MAX_CONNECTIONS,
                             timeout=app_settings.SAFETY_TIMEOUT_MS / 1000)

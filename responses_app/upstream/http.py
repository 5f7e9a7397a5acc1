"""The upstream Responses API over `httpx.AsyncClient`: create a stream, resume one, retrieve,
cancel. The built-in simulator by default; a real provider with RELAY_UPSTREAM_API_KEY (and
RELAY_UPSTREAM_BASE_URL for another than OpenAI's). Every call bears the matching key:
RELAY_UPSTREAM_API_KEY for a provider, RELAY_SIMULATOR_API_KEY for the simulator (embedded or
standalone), which refuses requests without it.

Transport: httpx's own async transport spends about twice the CPU per streamed event of the
`httpx-aiohttp` transport (bench/README.md, transport), so the aiohttp transport is the default;
RELAY_UPSTREAM_TRANSPORT=httpx selects httpx's own.
The httpx API is the same either way, and tests may inject any transport (MockTransport too).
RELAY_UPSTREAM_TRANSPORT=websocket is the Responses API's WebSocket mode (upstream/websocket.py): a
subclass whose `create_stream` yields `EventFrames` (one event's JSON per item) instead of a
response body; `stream_reader` hands the runner the matching feed.

With RELAY_PROVIDERS, a client is made per provider (`Upstream(provider=...)`): its base URL, its
key, its transport, and what it can do (`resumable`, `can_retrieve`, `can_cancel`), which the
runner asks before it resumes, reconciles or cancels (providers.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import httpx
import orjson
from httpx_aiohttp.transport import map_aiohttp_exceptions

from ..compat import aiohttp_content
from ..conf import app_settings
from ..providers import SSE_TRANSPORTS, Provider, Supports
from ..simulator.app import models_payload
from ..simulator.inprocess import ASGIStreamTransport
from ..streaming.masking import MAX_CODE
from ..streaming.transcript import Step, Transcript
from .credentials import masked
from .embedded import EMBEDDED_BASE_URL, simulator_app


class UpstreamHTTPError(Exception):
    """The upstream answered with an error status before any stream."""

    def __init__(self, status: int, body: bytes, retry_after: float | None) -> None:
        self.status = status
        self.retry_after = retry_after
        self.code = self.provider_code = ""
        message = body[:500].decode("utf-8", "replace")
        try:
            error = orjson.loads(body).get("error") or {}
            self.provider_code = masked(str(error.get("code") or ""), MAX_CODE)  # a specific code, when given
            self.code = self.provider_code or masked(str(error.get("type") or ""), MAX_CODE)
            message = str(error.get("message") or message)
        except (orjson.JSONDecodeError, AttributeError):
            pass
        self.message = masked(message)  # an error body may echo what it was sent: the key
        super().__init__(f"upstream HTTP {status}: {self.code or ''} {self.message}".strip())

    @property
    def retryable(self) -> bool:
        return self.status in (408, 409, 429) or self.status >= 500


def base_url() -> str:
    """A real provider, a standalone simulator, or (by default) the embedded one, in-process."""
    return app_settings.UPSTREAM_BASE_URL or app_settings.SIMULATOR_BASE_URL or EMBEDDED_BASE_URL


def upstream_key() -> str:
    """The key for `base_url()`: never the provider's key to the simulator, nor the reverse."""
    return app_settings.UPSTREAM_API_KEY if app_settings.UPSTREAM_BASE_URL else app_settings.SIMULATOR_API_KEY


def auth_headers() -> dict[str, str]:
    key = upstream_key()
    return {"authorization": f"Bearer {key}"} if key else {}


def list_models(*, timeout: float = 2.0) -> list[dict[str, Any]]:
    """GET /models, synchronously (the page's model picker); in-process for the embedded simulator."""
    base = base_url()
    if base == EMBEDDED_BASE_URL:
        return list(models_payload()["data"])
    response = httpx.get(f"{base}/models", headers=auth_headers(), timeout=timeout)
    response.raise_for_status()
    data = orjson.loads(response.content).get("data")
    return data if isinstance(data, list) else []


def make_transport(base: str, kind: str | None = None) -> httpx.AsyncBaseTransport:
    if base == EMBEDDED_BASE_URL:
        return ASGIStreamTransport(simulator_app())
    # One client serves every stream of the process: both transports default to 100 connections,
    # which would queue the 101st concurrent stream.
    size = app_settings.UPSTREAM_MAX_CONNECTIONS
    limits = httpx.Limits(max_connections=size, max_keepalive_connections=min(size, 100))
    if (kind or app_settings.UPSTREAM_TRANSPORT) == "aiohttp":
        from httpx_aiohttp import AiohttpTransport

        return AiohttpTransport(limits=limits)
    return httpx.AsyncHTTPTransport(limits=limits)


class EventFrames(Protocol):
    """A stream whose items are each one event's JSON, without SSE framing (WebSocket mode)."""

    def __aiter__(self) -> AsyncIterator[str]: ...


class Upstream:
    resumable = True  # a background response can be streamed again after a drop (starting_after)
    persistent = False  # its pooled connections are released when the process has no runner left

    def __init__(self, *, base: str | None = None, api_key: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, provider: Provider | None = None) -> None:
        headers = {"accept": "text/event-stream"}
        kind = None
        if provider is not None:  # a named provider's (or the implicit one's) address, key and transport
            base = base or provider.base_url or EMBEDDED_BASE_URL
            api_key = provider.api_key if api_key is None else api_key
            kind = provider.transport if provider.transport in SSE_TRANSPORTS else None
        self.provider = provider
        supports = provider.supports if provider is not None else Supports()
        # What the relay may ask of it: a resume needs both a background response and a retrieve.
        self.resumable = type(self).resumable and supports.background and supports.retrieve
        self.can_retrieve, self.can_cancel = supports.retrieve, supports.cancel
        key = upstream_key() if api_key is None else api_key
        if key:
            headers["authorization"] = f"Bearer {key}"
        self.base = (base or base_url()).rstrip("/")
        self.client = httpx.AsyncClient(
            transport=transport or make_transport(self.base, kind),
            headers=headers,
            # No read timeout on streams: long silent reasoning is legitimate; the runner owns
            # idle detection and tells "no text" from "no activity".
            timeout=httpx.Timeout(connect=10.0, read=None, write=30.0, pool=30.0),
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    @asynccontextmanager
    async def create_stream(self, body: dict[str, Any]) -> AsyncIterator[httpx.Response | EventFrames]:
        # As str, encoded again by httpx: orjson's bytes keep a buffer larger than most bodies
        # however short the JSON, and the response holds its request, so each stream held one
        # (bench/README.md, storage).
        request = self.client.build_request(
            "POST", f"{self.base}/responses", content=orjson.dumps(dict(body, stream=True)).decode(),
            headers={"content-type": "application/json"},
        )
        async with self._open(request) as response:
            yield response

    @asynccontextmanager
    async def resume_stream(self, response_id: str, starting_after: int | None) -> AsyncIterator[httpx.Response]:
        params: dict[str, Any] = {"stream": "true"}
        if starting_after is not None:
            params["starting_after"] = str(starting_after)
        request = self.client.build_request("GET", f"{self.base}/responses/{response_id}", params=params)
        async with self._open(request) as response:
            yield response

    async def retrieve(self, response_id: str) -> dict[str, Any]:
        response = await self.client.get(f"{self.base}/responses/{response_id}",
                                         headers={"accept": "application/json"})
        if response.status_code >= 400:
            raise UpstreamHTTPError(response.status_code, response.content, _retry_after(response))
        return orjson.loads(response.content)  # type: ignore[no-any-return]

    async def cancel(self, response_id: str) -> dict[str, Any] | None:
        response = await self.client.post(f"{self.base}/responses/{response_id}/cancel")
        if response.status_code >= 400:
            return None
        return orjson.loads(response.content)  # type: ignore[no-any-return]

    @asynccontextmanager
    async def _open(self, request: httpx.Request) -> AsyncIterator[httpx.Response]:
        response = await self.client.send(request, stream=True)
        try:
            if response.status_code >= 400:
                body = await response.aread()
                raise UpstreamHTTPError(response.status_code, body, _retry_after(response))
            yield response
        finally:
            await response.aclose()


CHUNK_BYTES = 16 * 1024  # at most this much per read, as httpx-aiohttp's own iterator


class _AiohttpChunks:
    """The body of a response from the aiohttp transport, read straight from aiohttp's buffer.

    httpx's `aiter_bytes` goes through four generators (httpx's two, the transport's, aiohttp's),
    and each keeps the chunk it last passed on while it waits for the next: a stream gone quiet
    held its last read, up to CHUNK_BYTES (bench/README.md, storage: memory per stream).
    This iterator keeps nothing between reads; aiohttp's errors become httpx's, as the transport's."""

    __slots__ = ("_content",)

    def __init__(self, content: Any) -> None:
        self._content = content

    def __aiter__(self) -> _AiohttpChunks:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk: bytes = await self._content.read(CHUNK_BYTES)
        except Exception:
            # mapped as the transport maps them; the context manager only on this path (a
            # generator built and closed per chunk was a measurable share of the read)
            with map_aiohttp_exceptions():
                raise
        if not chunk:
            raise StopAsyncIteration
        return chunk


def body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The streamed body's bytes, decoded. Straight from aiohttp when the aiohttp transport carries
    it unencoded (what the relay asks for: SSE), holding no chunk between reads; otherwise httpx's
    `aiter_bytes` (another transport, or a content encoding to undo)."""
    content = aiohttp_content(response)  # a private reach-in: compat.py
    if content is not None and response.headers.get("content-encoding", "identity").strip().lower() in (
            "", "identity"):
        response.is_stream_consumed = True  # as aiter_raw would: a second read fails, never half-reads
        return _AiohttpChunks(content)
    return response.aiter_bytes()


def stream_reader(response: httpx.Response | EventFrames, transcript: Transcript
                  ) -> tuple[AsyncIterator[Any], Callable[[Any, float], Step]]:
    """What the runner iterates and the transcript method each item goes to: a response body's
    chunks to `feed` (SSE bytes), WebSocket mode's events to `feed_event` (one JSON each)."""
    if isinstance(response, httpx.Response):
        return body_chunks(response), transcript.feed
    return aiter(response), transcript.feed_event


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None

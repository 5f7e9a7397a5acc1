"""Ask one provider, live, what it can do (`manage.py probe_provider NAME`), beside what the
settings claim (RELAY_PROVIDERS' `supports`).

Each probe is one small real call through the relay's own client of that provider
(`Upstream(provider=...)`), so it goes where the relay's requests go, with the same key:

- stream: a tiny streamed request (`max_output_tokens` 16), read by the streaming core;
- retrieve: GET /responses/{id} of that response;
- store: a second tiny request chained to it with `previous_response_id`;
- background and cancel: a background request, cancelled once the provider confirmed it (a
  background mode is only of use when the response can be retrieved again);
- websocket: the same tiny request in WebSocket mode, only where the provider's transport is
  websocket or it is asked for.

A probe's answer is yes, no (the provider refused: 400, 404, 405, 501, or ignored the ask), or
unclear (it could not be told: unreachable, another error); with a note.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from ..providers import Provider
from ..streaming import vocabulary as v
from ..streaming.transcript import Transcript
from .http import Upstream, UpstreamHTTPError, stream_reader

REFUSED = (400, 404, 405, 422, 501)  # statuses that mean "this server does not do that"
INPUT = "Say hello in two words."


@dataclass(frozen=True)
class Probe:
    capability: str
    claimed: bool | None  # None: the settings claim nothing (the stream itself)
    found: bool | None  # None: unclear, or not probed
    note: str = ""

    @property
    def mismatch(self) -> bool:
        """The settings claim what the provider did not do (the relay would depend on it)."""
        return bool(self.claimed) and self.found is False


def _body(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "input": INPUT, "max_output_tokens": 16, "store": True, **extra}


async def _stream(upstream: Upstream, body: dict[str, Any], *, until_created: bool = False) -> Transcript:
    """Read a streamed response (or only until the provider confirmed it)."""
    transcript = Transcript()
    async with upstream.create_stream(body) as response:
        chunks, feed = stream_reader(response, transcript)
        async for chunk in chunks:
            step = feed(chunk, time.monotonic())
            if step.terminal or (until_created and transcript.response_id):
                break
    if not transcript.terminal and not until_created:
        transcript.finish()
    return transcript


def _failed(exc: Exception) -> tuple[bool | None, str]:
    if isinstance(exc, UpstreamHTTPError):
        return (False if exc.status in REFUSED else None), f"HTTP {exc.status} {exc.code}".strip()
    return None, f"{type(exc).__name__}: {exc}"[:120]


async def probe(provider: Provider, model: str, *, websocket: bool = False) -> list[Probe]:
    from .websocket import WebSocketUpstream

    supports = provider.supports
    found: list[Probe] = []
    upstream = Upstream(provider=provider)  # SSE, whatever the transport: retrieve and cancel are HTTP
    try:
        try:
            first = await _stream(upstream, _body(model, stream=True))
            ok = first.terminal and first.response_id is not None
            found.append(Probe("stream", None, ok, f"{first.status or 'no terminal event'}, id "
                                                   f"{(first.response_id or '-')[:24]}"))
        except (UpstreamHTTPError, httpx.HTTPError, OSError) as exc:
            found.append(Probe("stream", None, None, _failed(exc)[1]))
            return found  # nothing else can be asked
        response_id = first.response_id or ""
        try:
            got = await upstream.retrieve(response_id)
            found.append(Probe("retrieve", supports.retrieve, True, f"status {got.get('status')}"))
            retrievable = True
        except (UpstreamHTTPError, httpx.HTTPError, OSError) as exc:
            answer, note = _failed(exc)
            found.append(Probe("retrieve", supports.retrieve, answer, note))
            retrievable = False
        try:
            chained = await _stream(upstream, _body(model, stream=True, previous_response_id=response_id))
            # cut short at the probe's 16 tokens (a reasoning model always is) is a chain accepted too
            accepted = chained.status in (v.COMPLETED, v.INCOMPLETE)
            found.append(Probe("store", supports.store, accepted,
                               f"previous_response_id: {chained.status or 'no terminal event'}"))
        except (UpstreamHTTPError, httpx.HTTPError, OSError) as exc:
            answer, note = _failed(exc)
            found.append(Probe("store", supports.store, answer, f"previous_response_id: {note}"))
        found += await _background(upstream, provider, model, retrievable)
        if websocket or provider.websocket:
            ws = WebSocketUpstream(provider=provider)
            try:
                over_ws = await _stream(ws, _body(model))
                found.append(Probe("websocket", supports.websocket, over_ws.terminal, over_ws.status or "no terminal"))
            except (UpstreamHTTPError, httpx.HTTPError, OSError) as exc:
                answer, note = _failed(exc)
                found.append(Probe("websocket", supports.websocket, answer, note))
            finally:
                await ws.aclose()
        else:
            found.append(Probe("websocket", supports.websocket, None, "not probed (transport is SSE)"))
    finally:
        await upstream.aclose()
    return found


async def _background(upstream: Upstream, provider: Provider, model: str, retrievable: bool) -> list[Probe]:
    supports = provider.supports
    try:
        started = await _stream(upstream, _body(model, stream=True, background=True,
                                                max_output_tokens=256), until_created=True)
    except (UpstreamHTTPError, httpx.HTTPError, OSError) as exc:
        answer, note = _failed(exc)
        return [Probe("background", supports.background, answer, note),
                Probe("cancel", supports.cancel, None, "no background response to cancel")]
    response_id = started.response_id or ""
    acknowledged = bool((started.assembler.response() or {}).get("background"))
    background = Probe("background", supports.background, acknowledged and retrievable,
                       "acknowledged" + ("" if retrievable else ", but nothing retrieves it again")
                       if acknowledged else "the response is not a background one")
    response = await upstream.client.post(f"{upstream.base}/responses/{response_id}/cancel")
    if response.status_code < 300:
        cancel = Probe("cancel", supports.cancel, True, f"status {response.json().get('status')}")
    elif response.status_code in (404, 405, 501):
        cancel = Probe("cancel", supports.cancel, False, f"HTTP {response.status_code}")
    else:
        cancel = Probe("cancel", supports.cancel, None, f"HTTP {response.status_code} (it may have ended first)")
    return [background, cancel]

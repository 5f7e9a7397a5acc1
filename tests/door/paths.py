"""Every way a request can start, driven as its clients drive it: the new-conversation page's form,
the chat page's form, `POST api/requests`, Regenerate, Edit, an AG-UI run, the AI SDK chat
(each over HTTP to the real server, with the user's session and CSRF token) and the Python API
(`responses_app.api.submit`, in a process of its own). `attempt` answers the same `Outcome`
for each, whatever the path's own shape of an answer."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from tests.door.harness import CSRF, Door


@dataclass
class Outcome:
    status: int  # 201 for a request started (whatever the path answers then), else the refusal's status
    code: str = ""  # the refusal's code ("rate_limited", "too_many_requests_in_flight", "invalid_request" ...)
    retry_after: int | None = None
    request_id: str | None = None
    detail: str = ""  # the refusal as the path words it

    @property
    def started(self) -> bool:
        return self.status == 201 and self.request_id is not None


def _client(door: Door, user: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=door.url, timeout=30, headers={"X-CSRFToken": CSRF},
                             cookies={"sessionid": door.users[user]["session"], "csrftoken": CSRF})


def _refusal(response: httpx.Response) -> Outcome:
    retry = response.headers.get("Retry-After")
    try:
        body = response.json()
    except ValueError:  # a page: the form again, saying why
        page = response.text
        code = ("too_many_requests_in_flight" if "answers running" in page or "answer running" in page
                else "rate_limited" if "as many messages as allowed" in page else "invalid_request")
        return Outcome(response.status_code, code, int(retry) if retry else None, detail=page)
    code = body.get("code") or ("invalid_request" if response.status_code == 400 else "")
    return Outcome(response.status_code, code, int(retry) if retry else None, detail=json.dumps(body))


async def attempt(door: Door, path: str, user: str, *, text: str = "hello", model: str = "sim-text",
                  max_output_tokens: int | None = None, nul: bool = False) -> Outcome:
    """Start one request of `user` through `path`; `nul` puts a U+0000 where the path takes text."""
    me = door.users[user]
    if nul:
        text = "a\u0000b"
    metadata = {"door": user}
    key = str(uuid.uuid4())
    if path == "python":
        kwargs: dict[str, Any] = {"input": text, "model": model, "metadata": metadata}
        if max_output_tokens is not None:
            kwargs["max_output_tokens"] = max_output_tokens
        (result,) = await asyncio.to_thread(door.python, user, [kwargs])
        return python_outcome(result)
    conversation, turn = me["conversation"], me["turn"]
    async with _client(door, user) as client:
        if path in ("new", "chat"):
            form = {"input": text, "model": model, "client_request_id": key, "metadata": json.dumps(metadata)}
            response = await client.post("/c/new/" if path == "new" else f"/c/{conversation}/", data=form)
            if response.status_code == 302:
                found = re.search(r"#turn-([0-9a-f-]{36})", response.headers["location"])
                return Outcome(201, request_id=found.group(1) if found else None)
            return _refusal(response)
        if path == "api":
            body: dict[str, Any] = {"input": text, "model": model, "conversation": conversation,
                                    "client_request_id": key, "metadata": metadata}
            if max_output_tokens is not None:
                body["max_output_tokens"] = max_output_tokens
            response = await client.post("/api/requests", json=body)
            return Outcome(201, request_id=response.json()["id"]) if response.status_code == 201 else _refusal(response)
        if path in ("regenerate", "edit"):
            form = {"client_request_id": "a\u0000b" if nul and path == "regenerate" else key}
            if path == "edit":
                form["prompt"] = text
            response = await client.post(f"/c/{conversation}/turns/{turn}/{path}", data=form,
                                         headers={"Accept": "application/json"})
            return Outcome(201, request_id=response.json()["id"]) if response.status_code == 201 else _refusal(response)
        if path == "agui":
            url, body = "/api/agui/runs", {
                "threadId": conversation, "runId": key, "forwardedProps": {"model": model, "metadata": metadata},
                "messages": [{"id": key, "role": "user", "content": text}]}
        else:
            url, body = "/api/aisdk/chat", {
                "id": conversation, "model": model, "metadata": metadata,
                "messages": [{"id": key, "role": "user", "parts": [{"type": "text", "text": text}]}]}
        async with client.stream("POST", url, json=body) as response:  # the run's stream: its head is enough
            if response.status_code == 200:
                return Outcome(201, request_id=response.headers["X-Relay-Request-Id"])
            await response.aread()
            return _refusal(response)


def python_outcome(result: dict[str, Any]) -> Outcome:
    if result["status"] == 201:
        return Outcome(201, request_id=result["id"])
    return Outcome(result["status"], result["code"], result["retry_after"], detail=json.dumps(result["errors"]))


async def attempt_items(door: Door, path: str, user: str, items: list[dict[str, Any]], *,
                        trusted: bool = False) -> Outcome:
    """Send input items where the path takes any: the JSON API's `input`, the Python API's
    (`trusted` as given) or, for Regenerate, the turn's own stored input (the harness's `items`
    turn). The text-only paths carry them as their own clients would: AG-UI and AI SDK messages
    of other roles and parts beside the user's text, the forms' and Edit's text as JSON."""
    me, key, metadata = door.users[user], str(uuid.uuid4()), {"door": user}
    text = json.dumps(items)
    if path == "python":
        (result,) = await asyncio.to_thread(door.python, user, [
            {"input": items, "model": "sim-text", "metadata": metadata, "trusted": trusted}])
        return python_outcome(result)
    if path in ("new", "chat", "edit"):
        return await attempt(door, path, user, text=text)
    async with _client(door, user) as client:
        if path == "api":
            response = await client.post("/api/requests", json={
                "input": items, "model": "sim-text", "conversation": me["conversation"], "client_request_id": key,
                "metadata": metadata})
            return Outcome(201, request_id=response.json()["id"]) if response.status_code == 201 else _refusal(response)
        if path == "regenerate":
            return await attempt(door, path, user)
        others = [{"id": f"m{i}", "role": item.get("role", "system"), "content": text} for i, item in enumerate(items)]
        if path == "agui":
            url, body = "/api/agui/runs", {
                "threadId": me["conversation"], "runId": key, "forwardedProps": {"model": "sim-text",
                                                                                 "metadata": metadata},
                "messages": [*[m for m in others if m["role"] in ("system", "developer", "assistant")],
                             {"id": key, "role": "user", "content": "hello"}]}
        else:
            url, body = "/api/aisdk/chat", {
                "id": me["conversation"], "model": "sim-text", "metadata": metadata,
                "messages": [*[{"id": m["id"], "role": "system", "parts": [{"type": "text", "text": text}]}
                               for m in others],
                             {"id": key, "role": "user", "parts": [
                                 {"type": "text", "text": "hello"},
                                 {"type": "file", "mediaType": "image/png", "url": "https://169.254.169.254/x.png"}]}]}
        async with client.stream("POST", url, json=body) as response:
            if response.status_code == 200:
                return Outcome(201, request_id=response.headers["X-Relay-Request-Id"])
            await response.aread()
            return _refusal(response)

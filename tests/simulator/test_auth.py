"""The simulator answers only requests bearing its key (401 with the API's error body otherwise),
standalone and mounted; mounted, it also refuses hosts outside ALLOWED_HOSTS."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.simulator.helpers import AUTH, body, get, post_raw


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer wrong-key-123"}, {"authorization": "Basic x"}])
def test_standalone_refuses_without_the_key(simulator_url: str, headers: dict[str, str]) -> None:
    for method, path in [("GET", "/models"), ("POST", "/responses"), ("GET", "/responses/resp_1"),
                         ("POST", "/responses/resp_1/cancel")]:
        response = httpx.request(method, simulator_url + path, headers=headers, json=body("sim-text"))
        assert response.status_code == 401, (method, path)
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error" and set(error) == {"message", "type", "param", "code"}
        if "wrong" in headers.get("authorization", ""):
            assert error["code"] == "invalid_api_key" and "wrong-key-123" not in error["message"]


def test_another_caller_cannot_read_or_cancel_a_response(simulator_url: str) -> None:
    created = post_raw(simulator_url, body("sim-long", stream=False, background=True,
                                           metadata={"sim.tokens_per_s": "5"})).json()
    url = f"{simulator_url}/responses/{created['id']}"
    assert httpx.get(url).status_code == 401
    assert httpx.post(url + "/cancel").status_code == 401
    assert get(url).json()["status"] in ("queued", "in_progress")
    assert httpx.post(url + "/cancel", headers=AUTH).json()["status"] == "cancelled"


async def call(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, dict[str, Any]]:
    from project.asgi import application

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "root_path": "", "query_string": b"",
             "headers": headers, "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 8000),
             "client": ("127.0.0.1", 1)}
    await application(scope, receive, send)
    return sent[0]["status"], orjson.loads(sent[1]["body"])


async def test_mounted_simulator_checks_the_host_then_the_key() -> None:
    key = (b"authorization", b"Bearer sim-dev-key")
    status, _ = await call("/simulator/v1/models", [(b"host", b"127.0.0.1:8000"), key])
    assert status == 200
    status, data = await call("/simulator/v1/models", [(b"host", b"evil.example"), key])
    assert status == 400 and data["error"]["code"] == "invalid_host"
    status, data = await call("/simulator/v1/responses/resp_1", [(b"host", b"localhost:8000")])
    assert status == 401 and "didn't provide an API key" in data["error"]["message"]

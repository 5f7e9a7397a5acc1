"""The official openai SDK's stream helper as a test oracle, fed bytes through httpx.MockTransport."""

from __future__ import annotations

from typing import Any

import httpx
import openai


def _strip_parsed(value: Any) -> Any:
    # The helper's ParsedResponse adds `parsed*` fields the wire never carried.
    if isinstance(value, dict):
        return {k: _strip_parsed(v) for k, v in value.items() if k not in ("parsed", "parsed_arguments")}
    if isinstance(value, list):
        return [_strip_parsed(v) for v in value]
    return value


def sdk_client(body: bytes) -> openai.OpenAI:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return openai.OpenAI(api_key="test", base_url="http://oracle.test/v1",
                         http_client=httpx.Client(transport=httpx.MockTransport(handler)), max_retries=0)


def sdk_final_response(body: bytes) -> dict[str, Any]:
    """What `client.responses.stream(...).get_final_response()` returns, as a plain dict."""
    client = sdk_client(body)
    with client.responses.stream(model="oracle", input="x") as stream:
        final = stream.get_final_response()
    return _strip_parsed(final.to_dict(mode="json", exclude_unset=True))  # type: ignore[no-any-return]

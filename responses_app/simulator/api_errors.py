"""The API's error shape, raised anywhere in the simulator and rendered by the ASGI app."""

from __future__ import annotations

import orjson


class ApiError(Exception):
    """Answered as `{"error": {message, type, param, code}}`, the body the real API sends."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or []

    def body(self) -> bytes:
        return orjson.dumps(
            {
                "error": {
                    "message": self.message,
                    "type": self.type,
                    "param": self.param,
                    "code": self.code,
                }
            }
        )


def bad_request(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def not_found(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(404, message, param=param, code=code)


def http_fault(status: int, model: str) -> ApiError:
    """The bodies the real API answers with for rate limits and outages."""
    if status == 429:
        return ApiError(
            429,
            f"Rate limit reached for {model} in organization org-simulator on tokens per min "
            "(TPM): "
            "Limit 30000, Used 30000, Requested 512. Please try again in 1s.",
            type="tokens",
            code="rate_limit_exceeded",
            headers=[
                (b"retry-after", b"1"),
                (b"x-ratelimit-limit-tokens", b"30000"),
                (b"x-ratelimit-remaining-tokens", b"0"),
                (b"x-ratelimit-reset-tokens", b"1s"),
            ],
        )
    if status == 503:
        return ApiError(
            503,
            "The server is overloaded or not ready yet.",
            type="server_error",
            code="service_unavailable",
        )
    return ApiError(
        500,
        "The server had an error while processing your request. Sorry about that!",
        type="server_error",
    )

"""Bearer-key authentication for the simulator, answered the way the real API answers it.

A simulator mounted on a public server would let anyone read, cancel and generate responses, so
every request must carry `Authorization: Bearer <key>`; a missing or wrong key is a 401 with the
API's own error body. No Django here: the standalone server uses it too.
"""

from __future__ import annotations

import hmac

from .api_errors import ApiError
from .asgi_io import Scope

# The development default, shared by `make run`'s embedded simulator and the standalone server.
DEV_API_KEY = "sim-dev-key"


def _masked(key: str) -> str:
    return key[:3] + "*" * max(0, len(key) - 7) + key[-4:] if len(key) > 8 else "*" * len(key)


def check_authorization(scope: Scope, api_key: str) -> None:
    """Raise the API's 401 unless the request bears exactly `api_key`."""
    header = b""
    for name, value in scope.get("headers") or []:
        if name.lower() == b"authorization":
            header = value
            break
    scheme, _, provided = header.decode("latin-1").partition(" ")
    if not header or scheme.lower() != "bearer" or not provided.strip():
        raise ApiError(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization "
            "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        )
    provided = provided.strip()
    if not hmac.compare_digest(provided.encode(), api_key.encode()):
        raise ApiError(401, f"Incorrect API key provided: {_masked(provided)}.", code="invalid_api_key")

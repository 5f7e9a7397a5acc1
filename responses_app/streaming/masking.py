"""Error text from the upstream is data, never a secret: credentials masked, length bounded.

An upstream's error message is shown to people and stored (the request's error, its segments'
details, the view's meta, the Response snapshot, the raw event log). Some echo what they were
sent: a 401 that quotes the Authorization header puts the server's key in all of them. Every
such text passes `mask_secrets` first: each known secret (the configured keys, handed in as plain
strings) and anything shaped like a bearer token or an OpenAI-style key (`sk-...`) becomes
`[masked]`, and the text is cut to `limit` characters.

Pure: no Django, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

MASK = "[masked]"
MAX_MESSAGE = 1000  # characters of an upstream error message kept
MAX_CODE = 100  # ... and of its code
_MIN_SECRET = 6  # a configured secret shorter than this is not searched for (it would mangle text)
_TOKENS = re.compile(r"(?i)(\bbearer\s+)[^\s\"',;]+|\bsk-[A-Za-z0-9_\-]{8,}")


def _token(match: re.Match[str]) -> str:
    return (match.group(1) or "") + MASK


def mask_secrets(text: str, secrets: Sequence[str] = (), limit: int = MAX_MESSAGE) -> str:
    """`text` with every secret and token masked, in at most `limit` characters (an ellipsis the
    last when it was cut)."""
    cut = len(text) > 4 * limit
    if cut:  # masked first, then cut: a secret is never cut in half and kept
        text = text[:4 * limit]
    for secret in secrets:
        if len(secret) >= _MIN_SECRET and secret in text:
            text = text.replace(secret, MASK)
    text = _TOKENS.sub(_token, text)
    if len(text) > limit or cut:
        text = text[:limit - 1].rstrip() + "…"
    return text


def mask_error(error: Any, secrets: Sequence[str] = ()) -> Any:
    """An error object (`{"code", "message", ...}`) with its code and message masked; anything
    else as it is."""
    if not isinstance(error, dict):
        return error
    masked = {key: mask_secrets(value, secrets, MAX_MESSAGE if key == "message" else MAX_CODE)
              for key in ("code", "message") if isinstance(value := error.get(key), str)}
    return {**error, **masked} if any(error[key] != value for key, value in masked.items()) else error

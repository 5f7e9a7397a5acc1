"""Idempotency keys made of a client's own ids (a front end's chat and message ids, an AG-UI run
id, a form's key): a digest of the whole of them, never a cut. A prefix would make two messages
of a long chat id one key, and the second would silently get the first's request."""

from __future__ import annotations

import hashlib

from .models import ResponseRequest

KEY_MAX = ResponseRequest._meta.get_field("client_request_id").max_length or 100


def client_key(namespace: str, *parts: str) -> str:
    """`namespace:` and the SHA-256 of every part, each length-prefixed (so `a:b` + `c` and `a` +
    `b:c` differ); it fits the column at any length of the parts."""
    whole = "".join(f"{len(part)}:{part}" for part in parts).encode("utf-8", "surrogatepass")
    return f"{namespace}:{hashlib.sha256(whole).hexdigest()}"


def fitted(key: str) -> str:
    """A client's key as it is when it fits the column, else its digest (never its prefix)."""
    return key if len(key) <= KEY_MAX else client_key("sha256", key)

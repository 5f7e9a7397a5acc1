"""The credentials this server holds, so that no text from the upstream shows them.

`known()` is the configured keys (RELAY_UPSTREAM_API_KEY, RELAY_SIMULATOR_API_KEY, every
RELAY_PROVIDERS key: one provider's error never shows another's key either); `masked(text)`
is the core's `mask_secrets` with them. Every upstream error message passes it before it is stored
or shown: an HTTP error's body (upstream/http.py), a transport failure (relay/outcomes.py), the relay's
own errors and every message a request or segment stores (services.py); the core is handed
`known()` for the messages inside the stream (the view's meta, the Response snapshot) and the raw
event log for its error events.
"""

from __future__ import annotations

from ..conf import app_settings
from ..streaming.masking import MAX_MESSAGE, mask_secrets


def known() -> tuple[str, ...]:
    keys = (app_settings.UPSTREAM_API_KEY, app_settings.SIMULATOR_API_KEY,
            *(p.api_key for p in app_settings.PROVIDERS.values()))
    return tuple(dict.fromkeys(key for key in keys if key))


def masked(text: str, limit: int = MAX_MESSAGE) -> str:
    return mask_secrets(text, known(), limit)

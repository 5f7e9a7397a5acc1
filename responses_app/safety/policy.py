"""Which safety mode applies to a request, and what a checker's failure means under it."""

from __future__ import annotations

from ..conf import app_settings


def mode_for(model: str) -> str:
    """off | progressive | buffered: RELAY_SAFETY_MODES's entry for the model, else RELAY_SAFETY_MODE."""
    return str(app_settings.SAFETY_MODES.get(model, app_settings.SAFETY_MODE))


def fail_closed(mode: str) -> bool:
    """A checker error or timeout flags (True) or passes (False): RELAY_SAFETY_ON_ERROR, else
    fail_closed in buffered mode and fail_open otherwise."""
    if app_settings.SAFETY_ON_ERROR:
        return bool(app_settings.SAFETY_ON_ERROR == "fail_closed")
    return mode == "buffered"

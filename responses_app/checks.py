"""System checks: settings that parse but cannot work are refused at start-up, not at the first request.

`manage.py check`, `runserver`, `migrate` and `relayworker` run them; the ASGI application runs the
`safety` ones too (Daphne runs no system checks), so a web process with a bad checker never starts.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

SAFETY_TAG = "safety"


def safety_applies() -> bool:
    """A checker is used: some model has a safety mode other than off, or the precheck is on."""
    modes = {settings.RELAY_SAFETY_MODE, *settings.RELAY_SAFETY_MODES.values()}
    return bool(settings.RELAY_SAFETY_PRECHECK) or modes != {"off"}


@checks.register(SAFETY_TAG)
def safety_checker_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """RELAY_SAFETY_CHECKER makes a checker (its factory is called once, the process keeps it)."""
    if not safety_applies():
        return []
    from .safety.checkers import checker_from_settings

    try:
        checker_from_settings()
    except (ImproperlyConfigured, ValueError) as exc:
        return [checks.Error(str(exc), id="responses_app.E001",
                             hint="Fix RELAY_SAFETY_CHECKER (rules, moderation or a dotted path to a factory that "
                                  "returns a checker) or RELAY_SAFETY_RULES, or set RELAY_SAFETY_MODE=off.")]
    except Exception as exc:  # the factory itself failed
        return [checks.Error(f"RELAY_SAFETY_CHECKER {settings.RELAY_SAFETY_CHECKER!r} failed to make a checker: "
                             f"{type(exc).__name__}: {exc}", id="responses_app.E001")]
    return []


def refuse_bad_safety_settings() -> None:
    """For entry points that run no system checks (the ASGI application under Daphne)."""
    errors = [m for m in checks.run_checks(tags=[SAFETY_TAG]) if m.is_serious()]
    if errors:
        raise ImproperlyConfigured("; ".join(f"{m.id}: {m.msg}" for m in errors))


@checks.register()
def agui_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The AG-UI routes need the optional ag-ui-protocol package (the AI SDK routes do not)."""
    if importlib.util.find_spec("ag_ui") is not None:
        return []
    return [checks.Warning("ag-ui-protocol is not installed: the AG-UI routes (agui-run, agui-stream) answer 501.",
                           id="responses_app.W001", hint="pip install 'responses-relay[agui]'")]

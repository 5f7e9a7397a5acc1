"""System checks: a setting that cannot work is reported by `manage.py check` with an id and a hint,
never raised at import or at first use. `docs/configuration.md` lists the ids.

    responses_app.E001  RELAY_SAFETY_CHECKER cannot make a checker
    responses_app.E002  a RELAY_* setting has an invalid value (it reads as its default meanwhile)
    responses_app.E003  no channel layer (CHANNEL_LAYERS["default"])
    responses_app.E004  no runner anywhere: RELAY_INPROCESS_RUNNER=False with a layer that cannot
                        reach another process
    responses_app.E005  RELAY_BASE_TEMPLATE cannot be loaded
    responses_app.E006  a RELAY_TOOLS entry cannot be imported
    responses_app.E007  RELAY_OTEL=True without opentelemetry-api installed
    responses_app.E008  WebSocket mode (RELAY_UPSTREAM_TRANSPORT or a provider's transport) without the
                        websockets package (the `server` extra); the embedded simulator needs none
    responses_app.E020  a RELAY_PROVIDERS provider lists no models
    responses_app.E021  a RELAY_PROVIDERS provider at a host that needs a key has none
    responses_app.E022  a model listed by two RELAY_PROVIDERS providers
    responses_app.E023  a provider's transport is websocket and its supports say it has no WebSocket mode
    responses_app.E030  RELAY_ATTACHMENT_STORAGE names no storage of STORAGES
    responses_app.W001  a RELAY_* setting this app does not have (a typo?)
    responses_app.W002  ag-ui-protocol is not installed: the AG-UI routes answer 501
    responses_app.W020  a RELAY_PROVIDERS key (or supports key) this app does not have (a typo?)
    responses_app.W021  RELAY_ALLOWED_MODELS names a model no RELAY_PROVIDERS provider serves
    responses_app.W030  a message's attachments may be more than a provider takes in one request (50 MB)
  with --deploy:
    responses_app.E010  the upstream is the built-in simulator
    responses_app.E011  a real provider and no RELAY_ALLOWED_MODELS
    responses_app.E012  RELAY_METRICS_TOKEN shorter than 16 characters
    responses_app.E013  a RELAY_API_TOKENS token shorter than 32 characters

Servers that run no system checks (uvicorn, Daphne) get the same refusal from `refuse_errors()`,
which an ASGI module calls once the apps are loaded.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from .conf import BY_NAME, PREFIX, app_settings

TAG = "responses_app"
SAFETY_TAG = "safety"


def _error(id_: str, msg: str, hint: str | None = None) -> checks.CheckMessage:
    return checks.Error(msg, hint=hint, id=f"responses_app.{id_}")


@checks.register(TAG, SAFETY_TAG)
def safety_checker_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """RELAY_SAFETY_CHECKER makes a checker (its factory is called once, the process keeps it)."""
    if not app_settings.safety_applies():
        return []
    from .safety.checkers import checker_from_settings

    try:
        checker_from_settings()
    except (ImproperlyConfigured, ValueError) as exc:
        return [_error("E001", str(exc),
                       "Fix RELAY_SAFETY_CHECKER (rules, moderation or a dotted path to a factory that returns a "
                       "checker) or RELAY_SAFETY_RULES, or set RELAY_SAFETY_MODE='off'.")]
    except Exception as exc:  # the factory itself failed
        return [_error("E001", f"RELAY_SAFETY_CHECKER {app_settings.SAFETY_CHECKER!r} failed to make a checker: "
                               f"{type(exc).__name__}: {exc}")]
    return []


@checks.register(TAG)
def settings_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    found: list[checks.CheckMessage] = []
    for spec, error in app_settings.errors():
        found.append(_error("E002", error, f"{spec.doc} See docs/configuration.md."))
    for name in dir(settings):
        if name.startswith(PREFIX) and name[len(PREFIX):] not in BY_NAME:
            found.append(checks.Warning(f"{name} is not a setting of responses_app.",
                                        hint="See docs/configuration.md for the settings' names.",
                                        id="responses_app.W001"))
    found += _channel_layer_errors()
    found += _provider_errors()
    found += _template_errors()
    found += _tool_errors()
    found += _websocket_errors()
    found += _attachment_errors()
    if app_settings.OTEL and importlib.util.find_spec("opentelemetry") is None:
        found.append(_error("E007", "RELAY_OTEL=True needs the opentelemetry-api package.",
                            "pip install 'responses-relay[otel]' (and an SDK with an exporter to see the spans)."))
    return found


PROVIDER_FILE_BYTES = 50 * 1024 * 1024  # what the Responses API takes of files in one request


def _attachment_errors() -> list[checks.CheckMessage]:
    if not app_settings.ATTACHMENT_TYPES:
        return []
    from django.core.files.storage import storages

    found: list[checks.CheckMessage] = []
    alias = app_settings.ATTACHMENT_STORAGE
    if alias not in storages.backends:
        found.append(_error("E030", f"RELAY_ATTACHMENT_STORAGE {alias!r} is not a storage of STORAGES.",
                            f"Add STORAGES[{alias!r}], or set RELAY_ATTACHMENT_STORAGE to one of "
                            f"{', '.join(sorted(storages.backends))} (or RELAY_ATTACHMENT_TYPES to empty)."))
    most = app_settings.ATTACHMENT_MAX_BYTES * app_settings.ATTACHMENT_MAX_FILES * 4 // 3  # base64
    if most > PROVIDER_FILE_BYTES:
        found.append(checks.Warning(
            f"A message may carry {most // (1024 * 1024)} MB of attachments (base64), more than the Responses API "
            "takes in one request (50 MB): such a send would fail upstream.",
            hint="Lower RELAY_ATTACHMENT_MAX_BYTES or RELAY_ATTACHMENT_MAX_FILES.", id="responses_app.W030"))
    return found


def _channel_layer_errors() -> list[checks.CheckMessage]:
    layers = getattr(settings, "CHANNEL_LAYERS", None) or {}
    layer = layers.get("default")
    if not layer:
        return [_error("E003", "No channel layer: the relay needs CHANNEL_LAYERS['default'].",
                       "One process: {'default': {'BACKEND': 'channels.layers.InMemoryChannelLayer'}}; several: "
                       "channels_redis (pip install 'responses-relay[redis]').")]
    if not app_settings.INPROCESS_RUNNER and str(layer.get("BACKEND", "")).endswith("InMemoryChannelLayer"):
        return [_error("E004", "RELAY_INPROCESS_RUNNER=False with the in-memory channel layer: no process would "
                               "run a stream (a relayworker cannot hear this process).",
                       "Keep RELAY_INPROCESS_RUNNER=True, or use a channel layer shared by the processes (Redis).")]
    return []


def _websocket_errors() -> list[checks.CheckMessage]:
    from .upstream.embedded import EMBEDDED_BASE_URL
    from .upstream.http import base_url
    from .upstream.websocket import MISSING, client_installed, needs_client

    if client_installed():
        return []
    wanted = [f"RELAY_PROVIDERS[{name!r}]" for name, provider in app_settings.PROVIDERS.items()
              if provider.websocket and needs_client(provider.base_url or EMBEDDED_BASE_URL)]
    if app_settings.UPSTREAM_TRANSPORT == "websocket" and needs_client(base_url()):
        wanted.insert(0, "RELAY_UPSTREAM_TRANSPORT")
    return [_error("E008", f"{where} asks for WebSocket mode, which needs the websockets package.", MISSING)
            for where in wanted]


def _provider_errors() -> list[checks.CheckMessage]:
    """RELAY_PROVIDERS: each model served by one provider, each provider able to do what it is asked."""
    from urllib.parse import urlsplit

    from .providers import CAPABILITIES, KEYED_HOSTS, KEYS

    found: list[checks.CheckMessage] = []
    served: dict[str, str] = {}
    for name, provider in app_settings.PROVIDERS.items():
        where = f"RELAY_PROVIDERS[{name!r}]"
        for key in provider.unknown_keys:
            found.append(checks.Warning(f"{where} has a key {key!r} that a provider does not have.",
                                        hint=f"A provider's keys: {', '.join(KEYS)}.", id="responses_app.W020"))
        for key in provider.unknown_supports:
            found.append(checks.Warning(f"{where}['supports'] has a key {key!r} that is not a capability.",
                                        hint=f"Capabilities: {', '.join(CAPABILITIES)}.", id="responses_app.W020"))
        if not provider.models:
            found.append(_error("E020", f"{where} lists no models: no request would go to it.",
                                "List the model ids it serves: 'models': ['gpt-5', ...]."))
        host = (urlsplit(provider.base_url).hostname or "").lower()
        if not provider.api_key and any(host == h or (h.startswith(".") and host.endswith(h)) for h in KEYED_HOSTS):
            found.append(_error("E021", f"{where} at {host} has no api_key: every request would be refused (401).",
                                "Set its 'api_key' (read it from the environment in your settings)."))
        for model in provider.models:
            if model in served:
                found.append(_error("E022", f"The model {model!r} is listed by {where} and by "
                                            f"RELAY_PROVIDERS[{served[model]!r}]: the first one would serve it.",
                                    "List each model under one provider."))
            served.setdefault(model, name)
        if provider.websocket and not provider.supports.websocket:
            found.append(_error("E023", f"{where} has transport 'websocket' but its supports say it has no "
                                        "WebSocket mode.", "Use transport 'sse', or fix its supports."))
    if app_settings.PROVIDERS:
        for model in app_settings.ALLOWED_MODELS:
            if model not in served:
                found.append(checks.Warning(
                    f"RELAY_ALLOWED_MODELS names {model!r}, which no RELAY_PROVIDERS provider serves: it is refused.",
                    hint="Add it to a provider's models, or remove it.", id="responses_app.W021"))
    return found


def _template_errors() -> list[checks.CheckMessage]:
    from django.template import TemplateDoesNotExist
    from django.template.loader import get_template

    try:
        get_template(app_settings.BASE_TEMPLATE)
    except TemplateDoesNotExist:
        return [_error("E005", f"RELAY_BASE_TEMPLATE {app_settings.BASE_TEMPLATE!r} cannot be found.",
                       "Name a template of yours with the blocks title and content, or leave the setting unset.")]
    except Exception:  # a template with an error of its own: Django's own checks and pages report it
        return []
    return []


def _tool_errors() -> list[checks.CheckMessage]:
    from django.utils.module_loading import import_string

    found = []
    from .tools import Tool

    for path in app_settings.TOOLS:
        try:
            candidate = import_string(path)
        except ImportError as exc:
            found.append(_error("E006", f"RELAY_TOOLS entry {path!r} cannot be imported: {exc}",
                                "A dotted path to a function decorated with @responses_app.api.tool."))
            continue
        if not isinstance(candidate, Tool):
            found.append(_error("E006", f"RELAY_TOOLS entry {path!r} is not a tool: decorate it with "
                                        "@responses_app.api.tool."))
    return found


@checks.register(TAG, checks.Tags.security, deploy=True)
def deploy_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    found = []
    if app_settings.upstream_is_simulator:
        found.append(_error("E010", "The upstream is the built-in simulator.",
                            "Set RELAY_UPSTREAM_API_KEY (and RELAY_UPSTREAM_BASE_URL for a provider other than "
                            "OpenAI)."))
    elif not app_settings.ALLOWED_MODELS and not app_settings.PROVIDERS:  # each provider lists its models
        found.append(_error("E011", "A real provider and no RELAY_ALLOWED_MODELS: any user may ask for any model.",
                            "Set RELAY_ALLOWED_MODELS to the model ids users may pick."))
    if any(len(token) < 32 for token in app_settings.API_TOKENS):
        found.append(_error("E013", "A RELAY_API_TOKENS token is shorter than 32 characters.",
                            "Use long random tokens: python -c 'import secrets; print(secrets.token_urlsafe(32))'."))
    if app_settings.METRICS_TOKEN and len(app_settings.METRICS_TOKEN) < 16:
        found.append(_error("E012", "RELAY_METRICS_TOKEN is shorter than 16 characters.",
                            "Use a long random token: python -c 'import secrets; print(secrets.token_urlsafe())'."))
    return found


def refuse_errors(*, deploy: bool = False) -> None:
    """For entry points that run no system checks: ImproperlyConfigured naming every serious one."""
    errors = [m for m in checks.run_checks(tags=[TAG], include_deployment_checks=deploy) if m.is_serious()]
    if errors:
        raise ImproperlyConfigured("; ".join(f"{m.id}: {m.msg}" for m in errors))


@checks.register(TAG)
def agui_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The AG-UI routes need the optional ag-ui-protocol package (the AI SDK routes do not)."""
    if importlib.util.find_spec("ag_ui") is not None:
        return []
    return [checks.Warning("ag-ui-protocol is not installed: the AG-UI routes (agui-run, agui-stream) answer 501.",
                           id="responses_app.W002", hint="pip install 'responses-relay[agui]'")]

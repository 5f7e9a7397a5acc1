"""Named upstreams (RELAY_PROVIDERS): what each one is and what it can do, as plain values.

    RELAY_PROVIDERS = {
        "openai": {"base_url": "https://api.openai.com/v1", "api_key": "sk-…", "models": ["gpt-5"]},
        "local": {"label": "On this machine", "base_url": "http://127.0.0.1:11434/v1",
                  "models": ["llama3.2"], "supports": {"retrieve": False, "cancel": False,
                                                       "background": False, "store": False}},
    }

Each request records the provider its model was served by (`ResponseRequest.provider`), chosen
at the door (submission.py) from the model; its runner, a takeover, a reconcile and a cancel go
back to that one. Without RELAY_PROVIDERS there is one provider, the implicit `DEFAULT`, made
of the single-upstream settings (RELAY_UPSTREAM_*, the simulator's, RELAY_ALLOWED_MODELS), and
a request that names no provider (one made before providers were named) goes to it too.

`supports` says what the relay may ask of a provider: `retrieve` (GET /responses/{id}: reconcile
a broken stream, resume a background one), `cancel` (POST …/cancel), `background` (a response
that runs on without its stream), `websocket` (WebSocket mode), `store` (it keeps responses, so
a turn may chain to the last with `previous_response_id`; otherwise every turn carries the whole
conversation). Parsed here without Django; conf.py reads the setting, checks.py judges it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .conf_values import json_mapping

DEFAULT = ""  # the implicit provider's name: the single-upstream settings
SSE_TRANSPORTS = ("aiohttp", "httpx")
CAPABILITIES = ("retrieve", "cancel", "background", "websocket", "store")
KEYS = ("label", "base_url", "api_key", "transport", "models", "supports", "simulator")
# Hosts that refuse a request without a key (checks.py: responses_app.E021).
KEYED_HOSTS = ("api.openai.com", ".openai.azure.com", "openrouter.ai", "api.x.ai", ".azure.com")


@dataclass(frozen=True)
class Supports:
    retrieve: bool = True
    cancel: bool = True
    background: bool = True
    websocket: bool = True
    store: bool = True

    def as_dict(self) -> dict[str, bool]:
        return {name: bool(getattr(self, name)) for name in CAPABILITIES}


@dataclass(frozen=True)
class Provider:
    name: str
    base_url: str  # empty: the built-in simulator (the implicit provider only)
    api_key: str = ""
    transport: str = "aiohttp"  # aiohttp, httpx (SSE) or websocket
    models: tuple[str, ...] = ()  # empty: any model (the implicit provider without an allowlist)
    supports: Supports = field(default_factory=Supports)
    label: str = ""
    simulator: bool = False  # the built-in simulator (embedded or standalone): sim.* metadata allowed
    unknown_keys: tuple[str, ...] = ()  # keys the setting gave that are not a provider's (a typo?)
    unknown_supports: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        return self.label or self.name or "Models"

    @property
    def websocket(self) -> bool:
        return self.transport == "websocket"

    def serves(self, model: str) -> bool:
        return not self.models or model in self.models


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a string, got {type(value).__name__}")
    return value.strip()


def _flag(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise ValueError(f"{where} must be true or false, got {value!r}")


def parse_one(name: str, raw: Any, *, default_transport: str = "aiohttp") -> Provider:
    where = f"[{name!r}]"
    if not name or any(c.isspace() for c in name) or len(name) > 64:
        raise ValueError(f"{where}: a provider's name is 1 to 64 characters without spaces")
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be a dict (base_url, api_key, transport, models, supports)")
    base = _text(raw.get("base_url", ""), f"{where}['base_url']").rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise ValueError(f"{where}['base_url'] must be an http(s) URL, got {base!r}")
    transport = _text(raw.get("transport", "sse"), f"{where}['transport']").lower()
    if transport == "sse":
        transport = default_transport if default_transport in SSE_TRANSPORTS else "aiohttp"
    if transport not in (*SSE_TRANSPORTS, "websocket"):
        raise ValueError(f"{where}['transport'] must be sse, aiohttp, httpx or websocket, got {transport!r}")
    models = raw.get("models", ())
    if isinstance(models, str):
        models = models.split(",")
    if not isinstance(models, (list, tuple)) or not all(isinstance(m, str) for m in models):
        raise ValueError(f"{where}['models'] must be a list of model ids")
    supports = raw.get("supports", {})
    if not isinstance(supports, Mapping):
        raise ValueError(f"{where}['supports'] must be a dict of {', '.join(CAPABILITIES)}: true or false")
    return Provider(
        name=name, base_url=base, api_key=_text(raw.get("api_key", ""), f"{where}['api_key']"),
        transport=transport, models=tuple(m.strip() for m in models if m.strip()),
        supports=Supports(**{key: _flag(value, f"{where}['supports'][{key!r}]")
                             for key, value in supports.items() if key in CAPABILITIES}),
        label=_text(raw.get("label", ""), f"{where}['label']"),
        simulator=_flag(raw.get("simulator", False), f"{where}['simulator']"),
        unknown_keys=tuple(str(k) for k in raw if k not in KEYS),
        unknown_supports=tuple(str(k) for k in supports if k not in CAPABILITIES),
    )


def parse(raw: Any) -> dict[str, Provider]:
    """{name: {base_url, api_key, transport, models, supports, label}} (or its JSON text)."""
    return {str(name): parse_one(str(name), spec) for name, spec in json_mapping(raw, "providers").items()}


def implicit(*, base_url: str, api_key: str, transport: str, models: tuple[str, ...],
             simulator_base_url: str, simulator_api_key: str) -> Provider:
    """The one provider of the single-upstream settings (a real one, or the built-in simulator)."""
    if base_url:
        return Provider(DEFAULT, base_url, api_key, transport, models)
    return Provider(DEFAULT, simulator_base_url, simulator_api_key, transport, models, simulator=True)


def route(providers: Mapping[str, Provider], model: str) -> Provider | None:
    """The provider that serves `model`: the first that lists it, else one that serves any model."""
    listed = next((p for p in providers.values() if model in p.models), None)
    return listed or next((p for p in providers.values() if not p.models), None)

"""The app's settings: every `RELAY_*` setting, its default and its validation, in one place.

    from responses_app.conf import app_settings
    app_settings.MAX_OUTPUT_TOKENS      # settings.RELAY_MAX_OUTPUT_TOKENS, or its default

This module is the only one that reads `RELAY_*` from the host's settings (as DRF's
`api_settings` and allauth's `app_settings` do). Values are read lazily, on first use, and cached
until a `RELAY_*` setting (or DEBUG) changes (`setting_changed`, sent by tests' overrides).

A value may be given typed (`RELAY_ALLOWED_MODELS = ["gpt-4.1"]`) or as the text an environment
variable would carry (`"gpt-4.1,gpt-4.1-mini"`, `"true"`, `"20/m"`): `from_environ()` collects
the `RELAY_*` variables of an environment for a settings module that wants them. An invalid value
is never an exception at import or at first use: it reads as its default and `manage.py check`
reports it (responses_app.E002, see checks.py); `docs/configuration.md` lists every setting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import conf_values as values
from . import providers as _providers
from .conf_values import SAFETY_MODES
from .streaming.assembler import MAX_ITEMS

PREFIX = "RELAY_"
OPENAI_BASE_URL = "https://api.openai.com/v1"
TRANSPORTS = ("aiohttp", "httpx", "websocket")


# --- the settings ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    name: str  # without the RELAY_ prefix
    default: Any  # a value, or a callable taking the app settings (for defaults that follow others)
    parse: Callable[[Any], Any]
    doc: str
    group: str

    @property
    def setting(self) -> str:
        return PREFIX + self.name


def _default_redact_fields(_: AppSettings) -> tuple[str, ...]:
    from .streaming.redact import DEFAULT_FIELDS  # plain data

    return tuple(DEFAULT_FIELDS)


def _default_upstream_url(app: AppSettings) -> str:
    return OPENAI_BASE_URL if app.UPSTREAM_API_KEY else ""


SETTINGS: tuple[Setting, ...] = (
    # upstream
    Setting("UPSTREAM_API_KEY", "", values.text, "The provider's API key. Set it (and nothing else) to use OpenAI.",
            "upstream"),
    Setting("UPSTREAM_BASE_URL", _default_upstream_url, values.url,
            "The provider's base URL (…/v1). Empty: the built-in simulator. With a key and no URL: OpenAI's.",
            "upstream"),
    Setting("UPSTREAM_TRANSPORT", "aiohttp", values.choice(*TRANSPORTS),
            "aiohttp (SSE over httpx-aiohttp, cheaper per event), httpx (SSE over httpx's own) or websocket "
            "(the Responses API's WebSocket mode, docs/upstream-websocket.md).", "upstream"),
    Setting("UPSTREAM_WS_MAX_AGE_S", 2400, values.seconds,
            "WebSocket mode: a connection older than this takes no new response (the provider's limit is an "
            "hour; the request deadline must fit in what is left).", "upstream"),
    Setting("UPSTREAM_NO_OBFUSCATION", True, values.boolean,
            "Ask the provider for no padding on streamed deltas (stream_options.include_obfuscation=false); "
            "false for a provider that refuses stream_options. Padding is never stored either way.", "upstream"),
    Setting("UPSTREAM_MAX_CONNECTIONS", 2000, values.integer(), "Upstream connections per process.", "upstream"),
    Setting("SIMULATOR_BASE_URL", "", values.url,
            "A standalone simulator (python -m responses_app.simulator) when there is no provider; empty: "
            "the embedded one, reached in-process.", "upstream"),
    Setting("SIMULATOR_API_KEY", "sim-dev-key", values.text, "The bearer key the simulator demands.", "upstream"),
    Setting("ALLOWED_MODELS", (), values.names,
            "Models a user may ask for; empty allows any (required with a provider under check --deploy).",
            "upstream"),
    Setting("PROVIDERS", {}, _providers.parse,
            "Several named upstreams at once: {name: {base_url, api_key, transport, models, supports, label}} "
            "(or its JSON), each model served by the one that lists it (docs/providers.md). Empty: the one "
            "upstream of the settings above.", "upstream"),
    Setting("BACKGROUND_DEFAULT", True, values.boolean,
            "Ask for background mode, so a dropped stream can be resumed where the provider allows it "
            "(not over WebSocket mode, which has none: a request asking for it goes over HTTP).",
            "upstream"),
    Setting("MAX_OUTPUT_TOKENS", 8192, values.integer(), "The cap on max_output_tokens of every upstream request.",
            "upstream"),
    Setting("PRICES", {}, values.prices,
            "Prices per million tokens per model, in RELAY_CURRENCY: {model: {input, cached_input, output}} "
            "(or its JSON; numbers or their text, read as Decimal; cached_input defaults to input). The pages "
            "show each answer's cost, each conversation's and the analytics'. Empty: no cost is shown; a "
            "model not listed has none.", "upstream"),
    Setting("CURRENCY", "USD", values.currency, "The ISO 4217 code of RELAY_PRICES (USD, EUR ...).", "upstream"),
    # pages and sockets
    Setting("BASE_TEMPLATE", "responses_app/base.html", values.text,
            "The template the app's pages extend (blocks: title and content).", "pages"),
    Setting("WEBSOCKET_PREFIX", None, values.optional_text,
            "Where responses_app.routing.websocket_urlpatterns are mounted (e.g. /assistant/); default: "
            "where responses_app.urls are included.", "pages"),
    Setting("SHARE_ANONYMOUS", False, values.boolean,
            "Owners may make a share link that works without an account (each link says whether it does); "
            "false: every share link needs a signed-in visitor.", "pages"),
    Setting("SEARCH_CONFIG", "english", values.text,
            "PostgreSQL: the text search configuration of the conversation search (simple, english, "
            "german ...); SQLite searches words as they are written.", "pages"),
    Setting("SEARCH_RATE", "30/m", values.rate, "Searches per user per window: N/s, N/m, N/h or N/d.", "pages"),
    Setting("TOOLS", ("responses_app.tools.get_weather", "responses_app.tools.get_time"), values.dotted_paths,
            "Dotted paths of the function tools offered to the model (functions decorated with "
            "responses_app.api.tool), imported when tools are offered. Default: the two built-in ones.", "tools"),
    # the relay
    Setting("FLUSH_INTERVAL_MS", 50, values.integer(), "The least time between two patches of a stream.", "relay"),
    Setting("FLUSH_MIN_CHARS", 32, values.integer(minimum=0), "A slow stream's patch waits for this much text…",
            "relay"),
    Setting("FLUSH_MAX_WAIT_MS", 100, values.integer(), "…at most this long after its oldest change.", "relay"),
    Setting("CHECKPOINT_INTERVAL_MS", 500, values.integer(), "The least time between two checkpoints of a stream.",
            "relay"),
    Setting("CHECKPOINT_MIN_EVENTS", 64, values.integer(), "A checkpoint once this many events came…", "relay"),
    Setting("CHECKPOINT_MAX_INTERVAL_MS", 2000, values.integer(), "…or this long passed while text flows.", "relay"),
    Setting("CHECKPOINT_GATHER_MS", 200, values.integer(minimum=0),
            "The process's checkpoint writer starts a round at most this often.", "relay"),
    Setting("MAX_EVENT_BYTES", 8 * 1024 * 1024, values.integer(), "The largest upstream event accepted.", "relay"),
    Setting("HOLD_WINDOW", 8, values.integer(), "Out-of-order events held back waiting for a gap to fill.", "relay"),
    Setting("MAX_OUTPUT_ITEMS", MAX_ITEMS, values.integer(),
            "Output items (and content parts) of one upstream response; past it the request ends incomplete "
            "(max_output_items).", "relay"),
    Setting("MAX_ANSWER_CHARS", 2_000_000, values.answer_chars,
            "Streamed characters of one answer (every round and kind of delta together); past it the "
            "upstream is stopped and the request ends incomplete (max_answer_chars). At most 20,000,000, "
            "so a checkpoint always fits the database.", "relay"),
    Setting("REDACT_FIELDS", _default_redact_fields, values.names,
            "Tool payloads redacted in the raw event log (streaming/redact.py).", "relay"),
    Setting("IDLE_TIMEOUT_S", 120, values.integer(), "No bytes from upstream this long: the stream is stalled.",
            "relay"),
    Setting("REQUEST_DEADLINE_S", 900, values.integer(),
            "The longest a logical request may run; then it ends incomplete (reason deadline).", "relay"),
    Setting("DB_THREADS", 8, values.integer(), "Database threads of the runners of one process.", "relay"),
    Setting("WS_DB_THREADS", 4, values.integer(), "Database threads of the websocket consumers of one process.",
            "relay"),
    Setting("INPROCESS_RUNNER", True, values.boolean,
            "Run streams inside the web process; false when manage.py relayworker processes do.", "relay"),
    Setting("GROUP_FANOUT", True, values.boolean,
            "Fan patches out to other processes' viewers (only with a channel layer across processes).", "relay"),
    # safety
    Setting("SAFETY_MODE", "off", values.choice(*SAFETY_MODES),
            "off, progressive (shown, checked, retracted on a violation) or buffered (shown once checked).",
            "safety"),
    Setting("SAFETY_MODES", {}, values.safety_modes, "Per-model modes: {model: mode} or model-a=buffered,model-b=off.",
            "safety"),
    Setting("SAFETY_PRECHECK", False, values.boolean, "Check the user's input before any upstream call.", "safety"),
    Setting("SAFETY_CHECKER", "rules", values.checker,
            "rules, moderation, or a dotted path to a checker factory.", "safety"),
    Setting("SAFETY_RULES", (), values.names, "Case-insensitive regular expressions for the rules checker.", "safety"),
    Setting("SAFETY_MODERATION_MODEL", "omni-moderation-latest", values.text, "The moderation checker's model.",
            "safety"),
    Setting("SAFETY_MAX_CONNECTIONS", 10, values.integer(), "The moderation checker's connections per process.",
            "safety"),
    Setting("SAFETY_ON_ERROR", "", values.choice("", "fail_open", "fail_closed"),
            "A checker's error or timeout: fail_open or fail_closed; empty: closed when buffered, open when "
            "progressive.", "safety"),
    Setting("SAFETY_TIMEOUT_MS", 2000, values.integer(), "How long a checker may take.", "safety"),
    Setting("SAFETY_WINDOW", "sentence", values.choice("sentence", "paragraph", "chars"),
            "What a checked window is.", "safety"),
    Setting("SAFETY_WINDOW_CHARS", 400, values.integer(), "A window's most characters.", "safety"),
    Setting("SAFETY_CONTEXT_CHARS", 200, values.integer(), "Text before a window checked with it.", "safety"),
    # limits
    Setting("MAX_CONCURRENT_PER_USER", 4, values.integer(), "Requests in flight per user.", "limits"),
    Setting("SUBMIT_RATE", "20/m", values.rate, "New requests per user per window: N/s, N/m, N/h or N/d.", "limits"),
    Setting("USER_INPUT_ITEMS", (), values.input_kinds,
            "Kinds of input item users may send beyond user messages of text and public https images "
            "(responses_app/input_items.py): system, developer, assistant, item_reference, function_call_output, "
            "mcp_approval_response, input_file, file_id ... Server code (api.submit) sends any.", "limits"),
    Setting("ATTACHMENT_TYPES", tuple(values.ATTACHMENT_TYPES), values.attachment_types,
            "What people may attach to a message, told by the file's bytes, not its name: png, jpeg, gif, "
            "webp (images), pdf and text (files). Empty: no attachments.", "limits"),
    Setting("ATTACHMENT_MAX_BYTES", 8 * 1024 * 1024, values.integer(), "The largest attachment, in bytes.",
            "limits"),
    Setting("ATTACHMENT_MAX_FILES", 4, values.integer(), "Attachments of one message.", "limits"),
    Setting("ATTACHMENT_STORAGE", "default", values.text,
            "The STORAGES alias attachments are saved in (Django's storage API). Keep it out of what MEDIA_URL "
            "serves: attachments are served only through the app, to who may see their turn.", "limits"),
    Setting("INSTRUCTIONS_MAX_CHARS", 4000, values.integer(),
            "The longest instructions (system prompt) a conversation's settings or a preset may hold.", "limits"),
    Setting("MAX_SOCKETS_PER_USER", 16, values.integer(), "Open websockets per user, across processes.", "limits"),
    Setting("WS_FRAME_RATE", 10, values.integer(), "Frames a socket may send per second…", "limits"),
    Setting("WS_FRAME_BURST", 30, values.integer(), "…and in a burst; beyond it dropped, then closed.", "limits"),
    Setting("API_TOKENS", {}, values.api_tokens,
            "Bearer tokens of programmatic clients of the AG-UI and AI SDK endpoints: {token: username} or "
            "alice=<token>,bob=<token> (each at least 32 characters under check --deploy).", "limits"),
    # operations
    Setting("METRICS_TOKEN", "", values.text,
            "GET /metrics needs Authorization: Bearer <token>; empty: loopback clients only.", "operations"),
    Setting("OTEL", False, values.boolean, "One OpenTelemetry span per logical request (needs opentelemetry-api).",
            "operations"),
)
BY_NAME = {spec.name: spec for spec in SETTINGS}


class AppSettings:
    """`app_settings.NAME` is `settings.RELAY_NAME` parsed, or its default."""

    def __init__(self, specs: Iterable[Setting] = SETTINGS) -> None:
        self._specs = {spec.name: spec for spec in specs}
        self._cache: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        spec = self.__dict__["_specs"].get(name)
        if spec is None:
            raise AttributeError(f"responses_app has no setting {name!r} (see docs/configuration.md)")
        cache = self.__dict__["_cache"]
        if name not in cache:
            value, _error = self.read(spec)
            cache[name] = value
        return cache[name]

    def read(self, spec: Setting) -> tuple[Any, str | None]:
        """(value, error): an invalid value reads as the default, with the reason (for checks.py)."""
        from django.conf import settings

        raw = getattr(settings, spec.setting, _MISSING)
        if raw is not _MISSING:
            try:
                return spec.parse(raw), None
            except ValueError as exc:
                return self.default(spec), f"{spec.setting} {exc}"
        return self.default(spec), None

    def default(self, spec: Setting) -> Any:
        return spec.parse(spec.default(self) if callable(spec.default) else spec.default)

    def errors(self) -> list[tuple[Setting, str]]:
        found = []
        for spec in self._specs.values():
            _value, error = self.read(spec)
            if error is not None:
                found.append((spec, error))
        return found

    def reload(self) -> None:
        self._cache.clear()

    # --- derived ------------------------------------------------------------------------------

    @property
    def upstream_is_simulator(self) -> bool:
        """No provider configured: the built-in simulator (embedded, or standalone at SIMULATOR_BASE_URL)."""
        if self.PROVIDERS:
            return all(p.simulator for p in self.PROVIDERS.values())
        return not self.UPSTREAM_BASE_URL

    def providers(self) -> dict[str, _providers.Provider]:
        """RELAY_PROVIDERS, or the one implicit provider of the single-upstream settings."""
        named: dict[str, _providers.Provider] = self.PROVIDERS
        return dict(named) or {_providers.DEFAULT: self._implicit()}

    def provider(self, name: str) -> _providers.Provider | None:
        """A provider by the name a request recorded (empty: the implicit one); None if gone."""
        named: dict[str, _providers.Provider] = self.PROVIDERS
        return named.get(name) if name else self._implicit()

    def _implicit(self) -> _providers.Provider:
        cache = self.__dict__["_cache"]
        if "_implicit" not in cache:
            cache["_implicit"] = _providers.implicit(
                base_url=self.UPSTREAM_BASE_URL, api_key=self.UPSTREAM_API_KEY, transport=self.UPSTREAM_TRANSPORT,
                models=self.ALLOWED_MODELS, simulator_base_url=self.SIMULATOR_BASE_URL,
                simulator_api_key=self.SIMULATOR_API_KEY)
        implicit: _providers.Provider = cache["_implicit"]
        return implicit

    def provider_for(self, model: str) -> _providers.Provider | None:
        """The provider that serves `model`, or None: no provider does."""
        return _providers.route(self.providers(), model)

    def safety_mode(self, model: str) -> str:
        return str(self.SAFETY_MODES.get(model, self.SAFETY_MODE))

    def safety_applies(self) -> bool:
        """A checker is used: some model has a safety mode other than off, or the precheck is on."""
        return bool(self.SAFETY_PRECHECK) or {self.SAFETY_MODE, *self.SAFETY_MODES.values()} != {"off"}


_MISSING = object()
app_settings = AppSettings()


def reload_on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting.startswith(PREFIX) or setting == "DEBUG":
        app_settings.reload()


def from_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The `RELAY_*` variables of an environment that name a setting, as they are (the app parses
    them): `globals().update(from_environ(os.environ))` in a settings module."""
    return {key: value for key, value in environ.items() if key.startswith(PREFIX) and key[len(PREFIX):] in BY_NAME}

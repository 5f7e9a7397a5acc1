"""One settings file. Every knob is read from the environment (or a `.env` file) through typed
readers that refuse bad values; the embedded defaults run the whole product on a fresh machine:
SQLite, the in-memory channel layer and the built-in Responses API simulator."""

from __future__ import annotations

import os
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from responses_app.relay.redact import DEFAULT_FIELDS as REDACT_DEFAULT_FIELDS  # plain data, no Django

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _positive_int(name: str, default: int, *, zero: bool = False) -> int:
    try:
        value = env.int(name, default=default)
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {env.str(name)!r}") from exc
    if value < 0 or (value == 0 and not zero):
        raise ImproperlyConfigured(f"{name} must be {'zero or more' if zero else 'positive'}, got {value}")
    return value


def _rate(name: str, default: str) -> tuple[int, int]:
    """`N/s`, `N/m`, `N/h` or `N/d` -> (N, window seconds)."""
    raw = env.str(name, default=default).strip()
    count, _, unit = raw.partition("/")
    windows = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if not count.isdigit() or int(count) <= 0 or unit not in windows:
        raise ImproperlyConfigured(f"{name} must look like 20/m (per s, m, h or d), got {raw!r}")
    return int(count), windows[unit]


# Only "development" is development: DEBUG, the demo account, the public dev keys, the simulator.
# "test" and "production" get the secure defaults; "production" also refuses unsafe combinations.
ENVIRONMENT = env.str("DJANGO_ENV", default="development")
if ENVIRONMENT not in ("development", "production", "test"):
    raise ImproperlyConfigured(f"DJANGO_ENV must be development, production or test, got {ENVIRONMENT!r}")
DEVELOPMENT = ENVIRONMENT == "development"
PRODUCTION = ENVIRONMENT == "production"

DEBUG = env.bool("DEBUG", default=DEVELOPMENT)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG=true is refused under DJANGO_ENV=production")
SECRET_KEY = env.str("SECRET_KEY", default="dev-only-insecure-key-change-me" if DEVELOPMENT else "")
if not SECRET_KEY:
    raise ImproperlyConfigured(f"SECRET_KEY must be set under DJANGO_ENV={ENVIRONMENT}")
if not DEVELOPMENT and "ALLOWED_HOSTS" not in env:
    raise ImproperlyConfigured(f"ALLOWED_HOSTS must be set under DJANGO_ENV={ENVIRONMENT} (comma-separated)")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
# Also the origins websockets accept besides the page's own (scheme://host[:port], exact).
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# --- HTTPS, behind a TLS-terminating reverse proxy -----------------------------------------------
# The proxy sets X-Forwarded-Proto; trusting it is what lets SSL redirect and secure cookies work
# behind it. Turn it off only when nothing in front can be trusted to set (or strip) that header.
TRUST_X_FORWARDED_PROTO = env.bool("DJANGO_TRUST_X_FORWARDED_PROTO", default=not DEVELOPMENT)
if TRUST_X_FORWARDED_PROTO:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=not DEVELOPMENT)
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=0 if DEVELOPMENT else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not DEVELOPMENT)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=not DEVELOPMENT)
SESSION_COOKIE_SECURE = env.bool("DJANGO_SESSION_COOKIE_SECURE", default=not DEVELOPMENT)
CSRF_COOKIE_SECURE = env.bool("DJANGO_CSRF_COOKIE_SECURE", default=not DEVELOPMENT)
SECURE_REFERRER_POLICY = "same-origin"

INSTALLED_APPS = [
    "daphne",  # first, so `runserver` serves ASGI and websockets
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "csp",
    "axes",
    "responses_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login into a 429 page
]
if not DEVELOPMENT:  # static files outside development (collectstatic first); runserver serves them in development
    MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")

# A Content-Security-Policy on every page: scripts only from this origin (chat.js is a module file,
# no inline script anywhere); inline style attributes stay allowed for the analytics legend.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],  # fetch and the same-origin websocket
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Login throttling (django-axes): a username + address pair is locked out after this many failures.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = _positive_int("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = _positive_int("AXES_COOLOFF_MINUTES", 15) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
if TRUST_X_FORWARDED_PROTO:
    # Behind the proxy every connection comes from it: take the client's address it forwards.
    AXES_IPWARE_PROXY_COUNT = 1
    AXES_IPWARE_META_PRECEDENCE_ORDER = ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"]

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
# With the pool, this makes it check each connection it hands out (one round trip): after a
# PostgreSQL restart, dead connections are dropped instead of given to a request.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Keep connections: the runner's database threads would otherwise reconnect for every write.
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    # The runner writes from worker threads while pages read: wait instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
elif env.bool("DATABASE_POOL", default=True):
    # PostgreSQL: one bounded psycopg pool per process, so a deployment's connection count is
    # (web processes + workers) x DATABASE_POOL_MAX whatever the load. Without it every request
    # thread kept its own connection for CONN_MAX_AGE (26-47 per web process measured) and two
    # web processes and two workers exhausted max_connections=100. Each of the runner's
    # RELAY_DB_THREADS threads and its checkpoint writer keeps one connection checked out while
    # the process runs streams; the rest serve pages, the API and websocket consumers (at most
    # RELAY_WS_DB_THREADS at once), which return theirs after every call. A caller finding the
    # pool empty waits up to DATABASE_POOL_TIMEOUT seconds, then fails (a 500 or a retried
    # runner write), never a new connection beyond the bound.
    _runner_connections = _positive_int("RELAY_DB_THREADS", 8) + 1
    _pool_max = _positive_int("DATABASE_POOL_MAX", _runner_connections + 8)
    if _pool_max < _runner_connections + 2:
        raise ImproperlyConfigured(f"DATABASE_POOL_MAX must be at least RELAY_DB_THREADS + 3 "
                                   f"({_runner_connections + 2}), got {_pool_max}")
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # a pooled connection goes back to the pool instead
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(_positive_int("DATABASE_POOL_MIN", 2), _pool_max),
        "max_size": _pool_max,
        "timeout": _positive_int("DATABASE_POOL_TIMEOUT", 10),
        # Idle connections beyond min_size close after 5 minutes: a quiet process shrinks back.
        "max_idle": 300,
    }
else:
    # DATABASE_POOL=false (e.g. behind pgbouncer in transaction mode): kept connections.
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")
# One inbound Redis list per process (every consumer in a process shares it) and one per named
# channel: its capacity bounds what a process may fall behind by. At 50 streams fanned out to
# another process, 1,000 stayed full and dropped messages (terminal ones too); at 20 patches a
# second per stream, 20,000 holds some 20 s of 50 streams. Messages older than the expiry are
# discarded: a patch that old is worthless (the viewer resyncs from a snapshot), and a start
# message for the runner channel is found again by the runners' lease sweep.
CHANNEL_LAYER_CAPACITY = _positive_int("CHANNEL_LAYER_CAPACITY", 20000)
CHANNEL_LAYER_EXPIRY_S = _positive_int("CHANNEL_LAYER_EXPIRY_S", 30)
# The Redis client's settings, shared by the channel layer and the cache; anything in REDIS_URL's
# query string (?socket_timeout=...) overrides them. channels_redis receives with a blocking
# BZPOPMIN of 5 s (RedisChannelLayer.brpop_timeout): the read timeout must be well above it, or
# an idle runworker's receive times out and the worker exits (redis-py 8's default is 5 s, equal
# to it). A dead server is still noticed quickly: connecting gives up after 2 s, and a connection
# idle for 15 s is pinged before use. Each concurrent command holds a connection, and every
# runner sends to its group on its own: the pool is sized for hundreds of streams per process
# (redis-py's default of 100 raised MaxConnectionsError under load). Redis' own maxclients
# (10,000 by default) must exceed processes x REDIS_MAX_CONNECTIONS.
REDIS_SOCKET_TIMEOUT_S = _positive_int("REDIS_SOCKET_TIMEOUT_S", 15)
if REDIS_SOCKET_TIMEOUT_S <= 5:
    raise ImproperlyConfigured("REDIS_SOCKET_TIMEOUT_S must exceed channels_redis' 5 s blocking read")
REDIS_MAX_CONNECTIONS = _positive_int("REDIS_MAX_CONNECTIONS", 1000)
REDIS_CLIENT_OPTIONS = {
    "socket_timeout": REDIS_SOCKET_TIMEOUT_S,
    "socket_connect_timeout": 2,
    "socket_keepalive": True,
    "health_check_interval": 15,
    "max_connections": REDIS_MAX_CONNECTIONS,
}
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, **REDIS_CLIENT_OPTIONS}],
                "capacity": CHANNEL_LAYER_CAPACITY,
                "expiry": CHANNEL_LAYER_EXPIRY_S,
                # Group membership outlives any websocket (a day; the default): a viewer is never
                # dropped from its group while connected. Dead processes' entries age out.
                "group_expiry": 86400,
            },
        }
    }
    # Shared by every process (rate limits and the like must hold across processes).
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "relay-cache",
            "OPTIONS": {k: v for k, v in REDIS_CLIENT_OPTIONS.items() if k != "max_connections"},
        }
    }
else:
    # One process: the in-memory layer delivers to local queues of this capacity.
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer",
                                  "CONFIG": {"capacity": CHANNEL_LAYER_CAPACITY, "expiry": CHANNEL_LAYER_EXPIRY_S}}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [] if DEVELOPMENT else [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("DJANGO_STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
# Outside development: `manage.py collectstatic` first; WhiteNoise serves the hashed, compressed
# files with far-future cache headers. Development serves them from the app directories.
if not DEVELOPMENT:
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "project.static_storage.StaticStorage"},
    }

# Every line logged while a request is handled names it and its upstream response
# (responses_app/logcontext.py: set by the runner and the request's websocket consumers).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_context": {"()": "responses_app.logcontext.RequestContextFilter"}},
    "formatters": {"relay": {"format": "%(asctime)s %(levelname)s %(name)s "
                                       "[request=%(request_id)s response=%(response_id)s] %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["request_context"],
                             "formatter": "relay"}},
    "loggers": {"responses_app": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")}},
}

# --- Operations: /metrics and tracing --------------------------------------------------------------
# Without a token /metrics answers loopback clients only (never a proxied request); with one, only
# requests bearing `Authorization: Bearer <token>`. Several processes share PROMETHEUS_MULTIPROC_DIR
# (read by prometheus_client itself from the environment): it must exist and be writable.
RELAY_METRICS_TOKEN = env.str("RELAY_METRICS_TOKEN", default="")
if RELAY_METRICS_TOKEN and not DEVELOPMENT and len(RELAY_METRICS_TOKEN) < 16:
    raise ImproperlyConfigured(f"RELAY_METRICS_TOKEN must be at least 16 characters under DJANGO_ENV={ENVIRONMENT}")
_multiproc_dir = env.str("PROMETHEUS_MULTIPROC_DIR", default="")
if _multiproc_dir and not (Path(_multiproc_dir).is_dir() and os.access(_multiproc_dir, os.W_OK)):
    raise ImproperlyConfigured(f"PROMETHEUS_MULTIPROC_DIR must be a writable directory, got {_multiproc_dir!r}")
# Bearer tokens of the front-end streams (AG-UI, the AI SDK; responses_app/frontends_views.py) for
# clients without a browser session: "username=token,username=token", each token acting as that user.
def _api_tokens(raw: str) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        username, sep, token = item.partition("=")
        if not sep or not username.strip() or not token.strip():
            raise ImproperlyConfigured(f"RELAY_API_TOKENS must look like alice=token1,bob=token2, got {item[:40]!r}")
        if not DEVELOPMENT and len(token.strip()) < 32:
            raise ImproperlyConfigured(f"RELAY_API_TOKENS: each token must be at least 32 characters under "
                                       f"DJANGO_ENV={ENVIRONMENT}")
        tokens[token.strip()] = username.strip()
    return tokens


RELAY_API_TOKENS = _api_tokens(env.str("RELAY_API_TOKENS", default=""))
# Scraped or probed straight from a process's port (no proxy, plain HTTP): never redirected to
# HTTPS, or a supervisor's probe of 127.0.0.1:8001/healthz gets a 301 to a port with no TLS.
SECURE_REDIRECT_EXEMPT = [r"^metrics$", r"^healthz$"]
# OpenTelemetry spans per logical request (GenAI semantic conventions), when the packages are installed.
RELAY_OTEL = env.bool("RELAY_OTEL", default=False)
if RELAY_OTEL:
    try:
        import opentelemetry.trace  # noqa: F401
    except ImportError as exc:
        raise ImproperlyConfigured("RELAY_OTEL=true needs the opentelemetry-api package "
                                   "(and an SDK with an exporter to see the spans)") from exc

# --- Upstream -------------------------------------------------------------------------------
# With no OPENAI_BASE_URL the relay talks to the built-in simulator mounted on this very server
# (development only: a production process refuses to start with the simulator on).
SIMULATOR_ENABLED = env.bool("SIMULATOR_ENABLED", default=DEVELOPMENT)
if PRODUCTION and SIMULATOR_ENABLED:
    raise ImproperlyConfigured(
        "SIMULATOR_ENABLED=true is refused under DJANGO_ENV=production: the simulator must not be "
        "reachable in production. Unset it and configure OPENAI_BASE_URL and OPENAI_API_KEY.")
# The bearer key the simulator demands and the relay sends it (embedded or standalone).
SIMULATOR_API_KEY = env.str("SIMULATOR_API_KEY", default="sim-dev-key" if DEVELOPMENT else "")
if SIMULATOR_ENABLED and not SIMULATOR_API_KEY:
    raise ImproperlyConfigured(f"SIMULATOR_API_KEY must be set to enable the simulator under DJANGO_ENV={ENVIRONMENT}")
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="").rstrip("/")
if OPENAI_API_KEY and not OPENAI_BASE_URL:
    OPENAI_BASE_URL = "https://api.openai.com/v1"
if not OPENAI_BASE_URL and not SIMULATOR_ENABLED:
    raise ImproperlyConfigured("Set OPENAI_BASE_URL and OPENAI_API_KEY, or keep SIMULATOR_ENABLED")
# A standalone simulator (`python -m responses_app.simulator`) when OPENAI_BASE_URL is empty; left
# empty, the relay reaches the embedded simulator in-process, whatever address the server has.
SIMULATOR_BASE_URL = env.str("SIMULATOR_BASE_URL", default="").rstrip("/")
UPSTREAM_IS_SIMULATOR = not OPENAI_BASE_URL  # sim.* metadata reaches only the simulator
# Models a user may ask for; with a real provider anything else is a 400 (every model costs money).
RELAY_ALLOWED_MODELS = env.list("RELAY_ALLOWED_MODELS", default=[])
if PRODUCTION and not UPSTREAM_IS_SIMULATOR and not RELAY_ALLOWED_MODELS:
    raise ImproperlyConfigured(
        "RELAY_ALLOWED_MODELS must be set under DJANGO_ENV=production with a real provider "
        "(comma-separated model ids, e.g. gpt-4.1-mini,gpt-4.1)")

# --- Relay ----------------------------------------------------------------------------------
RELAY_FLUSH_INTERVAL_MS = _positive_int("RELAY_FLUSH_INTERVAL_MS", 50)
# A slow flow's patches wait for this much text (the envelope costs about a dozen bytes), at the
# latest this long after their oldest change (never less than the interval); see bench/results/wire.md.
RELAY_FLUSH_MIN_CHARS = _positive_int("RELAY_FLUSH_MIN_CHARS", 32, zero=True)
RELAY_FLUSH_MAX_WAIT_MS = _positive_int("RELAY_FLUSH_MAX_WAIT_MS", 100)
# Checkpoints while text flows: no sooner than the interval after the last one, then once
# MIN_EVENTS events have come, the stream goes quiet, or MAX_INTERVAL has passed.
RELAY_CHECKPOINT_INTERVAL_MS = _positive_int("RELAY_CHECKPOINT_INTERVAL_MS", 500)
RELAY_CHECKPOINT_MIN_EVENTS = _positive_int("RELAY_CHECKPOINT_MIN_EVENTS", 64)
RELAY_CHECKPOINT_MAX_INTERVAL_MS = _positive_int("RELAY_CHECKPOINT_MAX_INTERVAL_MS", 2000)
# The process's checkpoint writer starts a round at most this often (a waiting runner hurries it):
# fewer, larger rounds cost the database thread less per checkpoint (relay/writer.py).
RELAY_CHECKPOINT_GATHER_MS = _positive_int("RELAY_CHECKPOINT_GATHER_MS", 200, zero=True)
RELAY_MAX_EVENT_BYTES = _positive_int("RELAY_MAX_EVENT_BYTES", 8 * 1024 * 1024)
RELAY_HOLD_WINDOW = _positive_int("RELAY_HOLD_WINDOW", 8)
RELAY_BACKGROUND_DEFAULT = env.bool("RELAY_BACKGROUND_DEFAULT", default=True)
# Tool payloads redacted in the raw event log (every kind by default; see relay/redact.py).
RELAY_REDACT_FIELDS = env.list("RELAY_REDACT_FIELDS", default=list(REDACT_DEFAULT_FIELDS))
RELAY_IDLE_TIMEOUT_S = _positive_int("RELAY_IDLE_TIMEOUT_S", 120)
# The longest a logical request may run, from its creation (takeovers keep the clock): then the
# upstream is cancelled and the request ends incomplete with reason "deadline", keeping its text.
RELAY_REQUEST_DEADLINE_S = _positive_int("RELAY_REQUEST_DEADLINE_S", 900)
RELAY_DB_THREADS = _positive_int("RELAY_DB_THREADS", 8)
# PostgreSQL: the threads websocket consumers and the websocket auth path run their database and
# cache calls on (relay/dbthreads.py `ws_call`), instead of asgiref's one thread-sensitive thread.
# They take a connection from the process's pool for each call and return it after: they share
# the DATABASE_POOL_MAX bound with pages and the API, and add none to it.
RELAY_WS_DB_THREADS = _positive_int("RELAY_WS_DB_THREADS", 4)
RELAY_UPSTREAM_MAX_CONNECTIONS = _positive_int("RELAY_UPSTREAM_MAX_CONNECTIONS", 2000)
# The runner consumer listens inside each web process (default); false when runworker processes do.
RELAY_INPROCESS_RUNNER = env.bool("RELAY_INPROCESS_RUNNER", default=True)
# Also fan patches out through the channel group (only matters when the layer spans processes).
RELAY_GROUP_FANOUT = env.bool("RELAY_GROUP_FANOUT", default=True)
RELAY_UPSTREAM_TRANSPORT = env.str("RELAY_UPSTREAM_TRANSPORT", default="aiohttp")
if RELAY_UPSTREAM_TRANSPORT not in ("aiohttp", "httpx"):
    raise ImproperlyConfigured("RELAY_UPSTREAM_TRANSPORT must be aiohttp or httpx")

# --- Safety policy for partial output (responses_app/safety/, README "Safety") ---------------------
# off | progressive (shown at once, checked per window, retracted on a violation) | buffered
# (released only after its window passed). RELAY_SAFETY_MODES overrides per model: "m1=buffered,m2=off".
SAFETY_MODE_CHOICES = ("off", "progressive", "buffered")


def _safety_mode(name: str, raw: str) -> str:
    mode = raw.strip().lower()
    if mode not in SAFETY_MODE_CHOICES:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(SAFETY_MODE_CHOICES)}, got {raw!r}")
    return mode


def _safety_modes(raw: str) -> dict[str, str]:
    modes: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        model, sep, mode = item.partition("=")
        if not sep or not model.strip():
            raise ImproperlyConfigured(f"RELAY_SAFETY_MODES must look like model-a=buffered,model-b=off, got {item!r}")
        modes[model.strip()] = _safety_mode("RELAY_SAFETY_MODES", mode)
    return modes


RELAY_SAFETY_MODE = _safety_mode("RELAY_SAFETY_MODE", env.str("RELAY_SAFETY_MODE", default="off"))
RELAY_SAFETY_MODES = _safety_modes(env.str("RELAY_SAFETY_MODES", default=""))
# Check the user's input before any upstream call; a flagged input makes no upstream request.
RELAY_SAFETY_PRECHECK = env.bool("RELAY_SAFETY_PRECHECK", default=False)
# rules (built in: RELAY_SAFETY_RULES, case-insensitive regular expressions, comma-separated),
# moderation (the provider's POST /v1/moderations), or a dotted path to a checker factory.
RELAY_SAFETY_CHECKER = env.str("RELAY_SAFETY_CHECKER", default="rules").strip()
if RELAY_SAFETY_CHECKER not in ("rules", "moderation") and "." not in RELAY_SAFETY_CHECKER:
    raise ImproperlyConfigured("RELAY_SAFETY_CHECKER must be rules, moderation or a dotted path to a checker "
                               f"factory (for example myproject.safety.make_checker), got {RELAY_SAFETY_CHECKER!r}")
# The `moderation` checker's model, and its bound on connections to the provider (one client per process).
RELAY_SAFETY_MODERATION_MODEL = env.str("RELAY_SAFETY_MODERATION_MODEL", default="omni-moderation-latest")
RELAY_SAFETY_MAX_CONNECTIONS = _positive_int("RELAY_SAFETY_MAX_CONNECTIONS", 10)
RELAY_SAFETY_RULES = env.list("RELAY_SAFETY_RULES", default=[])
# A checker's error or timeout: fail_closed (treated as flagged) or fail_open (treated as passed);
# empty: fail_closed in buffered mode, fail_open in progressive mode.
RELAY_SAFETY_ON_ERROR = env.str("RELAY_SAFETY_ON_ERROR", default="").strip().lower()
if RELAY_SAFETY_ON_ERROR not in ("", "fail_open", "fail_closed"):
    raise ImproperlyConfigured(f"RELAY_SAFETY_ON_ERROR must be fail_open or fail_closed, got {RELAY_SAFETY_ON_ERROR!r}")
RELAY_SAFETY_TIMEOUT_MS = _positive_int("RELAY_SAFETY_TIMEOUT_MS", 2000)
# A window: a sentence, a paragraph, or at most WINDOW_CHARS characters (whichever ends first for
# "sentence"/"paragraph"); each is checked with up to CONTEXT_CHARS of the text before it.
RELAY_SAFETY_WINDOW = env.str("RELAY_SAFETY_WINDOW", default="sentence").strip().lower()
if RELAY_SAFETY_WINDOW not in ("sentence", "paragraph", "chars"):
    raise ImproperlyConfigured(f"RELAY_SAFETY_WINDOW must be sentence, paragraph or chars, got {RELAY_SAFETY_WINDOW!r}")
RELAY_SAFETY_WINDOW_CHARS = _positive_int("RELAY_SAFETY_WINDOW_CHARS", 400)
RELAY_SAFETY_CONTEXT_CHARS = _positive_int("RELAY_SAFETY_CONTEXT_CHARS", 200)

# --- Limits (per user, held in Django's cache and the database, so across processes) ---------------
RELAY_MAX_CONCURRENT_PER_USER = _positive_int("RELAY_MAX_CONCURRENT_PER_USER", 4)
RELAY_SUBMIT_RATE = _rate("RELAY_SUBMIT_RATE", "20/m")
RELAY_MAX_OUTPUT_TOKENS = _positive_int("RELAY_MAX_OUTPUT_TOKENS", 8192)
RELAY_MAX_SOCKETS_PER_USER = _positive_int("RELAY_MAX_SOCKETS_PER_USER", 16)
# Frames a socket may send: a sustained rate and a burst; beyond it frames are dropped, then closed.
RELAY_WS_FRAME_RATE = _positive_int("RELAY_WS_FRAME_RATE", 10)
RELAY_WS_FRAME_BURST = _positive_int("RELAY_WS_FRAME_BURST", 30)

def _prices(raw: str) -> dict[str, dict[str, float]]:
    """RELAY_PRICES: JSON {model: {"input": usd, "cached_input": usd, "output": usd}} per million
    tokens; empty means no costs are shown."""
    if not raw.strip():
        return {}
    import json

    try:
        table = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"RELAY_PRICES must be a JSON object: {exc}") from exc
    if not isinstance(table, dict):
        raise ImproperlyConfigured("RELAY_PRICES must be a JSON object of models")
    prices: dict[str, dict[str, float]] = {}
    for model, row in table.items():
        if not isinstance(row, dict) or not set(row) <= {"input", "cached_input", "output"} or not row:
            raise ImproperlyConfigured(f"RELAY_PRICES[{model!r}] must be an object of input, cached_input, output")
        for key, value in row.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ImproperlyConfigured(f"RELAY_PRICES[{model!r}][{key!r}] must be a non-negative number")
        prices[str(model)] = {key: float(value) for key, value in row.items()}
    return prices


# Per-model prices in USD per million tokens, for the cost shown beside each answer's usage.
RELAY_PRICES = _prices(env.str("RELAY_PRICES", default=""))

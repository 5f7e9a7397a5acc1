"""One settings file. Every knob is read from the environment (or a `.env` file) through typed
readers that refuse bad values; the embedded defaults run the whole product on a fresh machine:
SQLite, the in-memory channel layer and the built-in Responses API simulator."""

from __future__ import annotations

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _positive_int(name: str, default: int) -> int:
    try:
        value = env.int(name, default=default)
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {env.str(name)!r}") from exc
    if value <= 0:
        raise ImproperlyConfigured(f"{name} must be positive, got {value}")
    return value


# "development" turns on DEBUG, the demo account and permissive defaults; anything else is production.
ENVIRONMENT = env.str("DJANGO_ENV", default="development")
if ENVIRONMENT not in ("development", "production", "test"):
    raise ImproperlyConfigured(f"DJANGO_ENV must be development, production or test, got {ENVIRONMENT!r}")
DEVELOPMENT = ENVIRONMENT in ("development", "test")

DEBUG = env.bool("DEBUG", default=ENVIRONMENT == "development")
SECRET_KEY = env.str("SECRET_KEY", default="" if not DEVELOPMENT else "dev-only-insecure-key-change-me")
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set outside development")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",  # first, so `runserver` serves ASGI and websockets
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "responses_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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
    # the process runs streams; the rest serve pages, the API and websocket consumers, which
    # return theirs after every call. A caller finding the pool empty waits up to
    # DATABASE_POOL_TIMEOUT seconds, then fails (a 500 or a retried runner write), never a new
    # connection beyond the bound.
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
STATIC_ROOT = BASE_DIR / "staticfiles"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"responses_app": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")}},
}

# --- Upstream -------------------------------------------------------------------------------
# With no key, the relay talks to the built-in simulator mounted on this very server.
SIMULATOR_ENABLED = env.bool("SIMULATOR_ENABLED", default=True)
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="").rstrip("/")
if OPENAI_API_KEY and not OPENAI_BASE_URL:
    OPENAI_BASE_URL = "https://api.openai.com/v1"
if not OPENAI_BASE_URL and not SIMULATOR_ENABLED:
    raise ImproperlyConfigured("Set OPENAI_BASE_URL and OPENAI_API_KEY, or keep SIMULATOR_ENABLED")
# Where the relay reaches the embedded simulator when OPENAI_BASE_URL is empty.
SIMULATOR_BASE_URL = env.str("SIMULATOR_BASE_URL", default="http://127.0.0.1:8000/simulator/v1").rstrip("/")

# --- Relay ----------------------------------------------------------------------------------
RELAY_FLUSH_INTERVAL_MS = _positive_int("RELAY_FLUSH_INTERVAL_MS", 50)
# Checkpoints while text flows: no sooner than the interval after the last one, then once
# MIN_EVENTS events have come, the stream goes quiet, or MAX_INTERVAL has passed.
RELAY_CHECKPOINT_INTERVAL_MS = _positive_int("RELAY_CHECKPOINT_INTERVAL_MS", 500)
RELAY_CHECKPOINT_MIN_EVENTS = _positive_int("RELAY_CHECKPOINT_MIN_EVENTS", 64)
RELAY_CHECKPOINT_MAX_INTERVAL_MS = _positive_int("RELAY_CHECKPOINT_MAX_INTERVAL_MS", 2000)
RELAY_MAX_EVENT_BYTES = _positive_int("RELAY_MAX_EVENT_BYTES", 8 * 1024 * 1024)
RELAY_HOLD_WINDOW = _positive_int("RELAY_HOLD_WINDOW", 8)
RELAY_BACKGROUND_DEFAULT = env.bool("RELAY_BACKGROUND_DEFAULT", default=True)
RELAY_REDACT_FIELDS = env.list("RELAY_REDACT_FIELDS", default=["arguments", "input", "output", "result", "code"])
RELAY_IDLE_TIMEOUT_S = _positive_int("RELAY_IDLE_TIMEOUT_S", 120)
RELAY_DB_THREADS = _positive_int("RELAY_DB_THREADS", 8)
RELAY_UPSTREAM_MAX_CONNECTIONS = _positive_int("RELAY_UPSTREAM_MAX_CONNECTIONS", 2000)
# The runner consumer listens inside each web process (default); false when runworker processes do.
RELAY_INPROCESS_RUNNER = env.bool("RELAY_INPROCESS_RUNNER", default=True)
# Also fan patches out through the channel group (only matters when the layer spans processes).
RELAY_GROUP_FANOUT = env.bool("RELAY_GROUP_FANOUT", default=True)
RELAY_UPSTREAM_TRANSPORT = env.str("RELAY_UPSTREAM_TRANSPORT", default="aiohttp")
if RELAY_UPSTREAM_TRANSPORT not in ("aiohttp", "httpx"):
    raise ImproperlyConfigured("RELAY_UPSTREAM_TRANSPORT must be aiohttp or httpx")

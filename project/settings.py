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
# Keep connections: the runner's database threads would otherwise reconnect for every write.
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The runner writes from worker threads while pages read: wait instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 1000, "expiry": 30},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}}}

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

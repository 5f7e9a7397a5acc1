"""One settings file. Every knob is read from the environment (or a `.env` file) through typed
readers that refuse bad values; the embedded defaults run the whole product on a fresh machine:
SQLite, the in-memory channel layer and the built-in Responses API simulator."""

from __future__ import annotations

import os
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from responses_app.conf import from_environ  # reads nothing of Django's settings

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
_trust_proxy = env.bool("DJANGO_TRUST_X_FORWARDED_PROTO", default=not DEVELOPMENT)
if _trust_proxy:
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
    "project",  # the demo site: its management command (bootstrap_demo) and its stylesheet
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
if _trust_proxy:
    # Behind the proxy every connection comes from it: the client is the address the proxy added,
    # the right-most of X-Forwarded-For (anything left of it the client may have written).
    # django-ipware reads these (the demo extra installs django-axes[ipware]).
    AXES_IPWARE_PROXY_ORDER = "right-most"
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
    # thread kept its own connection for CONN_MAX_AGE, and two web processes and two workers
    # exhausted PostgreSQL's default max_connections (bench/README.md, scaled). Each of the runner's
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
LOGIN_REDIRECT_URL = "responses_app:conversations"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("DJANGO_STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
# Attachments (responses_app/attachments.py) go to the default storage: here a folder nothing
# serves (no MEDIA_URL route); the app serves each file only to who may see its turn.
MEDIA_ROOT = Path(env.str("DJANGO_MEDIA_ROOT", default=str(BASE_DIR / "media")))
# Outside development: `manage.py collectstatic` first; WhiteNoise serves the hashed, compressed
# files with far-future cache headers. Development serves them from the app directories.
if not DEVELOPMENT:
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "project.static_storage.StaticStorage"},
    }

# Every line logged while a request is handled names it and its upstream response
# (responses_app/ops/logcontext.py: set by the runner and the request's websocket consumers).
# Django's own handler of `django.request` prints only under DEBUG (and mails ADMINS, none here):
# without DEBUG, an answer of 500 and its traceback go to stderr through `errors` (4xx warnings
# stay out of it), the app's loggers through `console` (StreamHandler: stderr).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_context": {"()": "responses_app.logcontext.RequestContextFilter"},
                "require_debug_false": {"()": "django.utils.log.RequireDebugFalse"}},
    "formatters": {"relay": {"format": "%(asctime)s %(levelname)s %(name)s "
                                       "[request=%(request_id)s response=%(response_id)s] %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["request_context"],
                             "formatter": "relay"},
                 "errors": {"class": "logging.StreamHandler", "level": "ERROR",
                            "filters": ["require_debug_false", "request_context"], "formatter": "relay"}},
    "loggers": {"responses_app": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
                "django.request": {"handlers": ["errors"]}},
}

# --- Operations -------------------------------------------------------------------------------
# Several processes share PROMETHEUS_MULTIPROC_DIR (read by prometheus_client itself from the
# environment): it must exist and be writable.
_multiproc_dir = env.str("PROMETHEUS_MULTIPROC_DIR", default="")
if _multiproc_dir and not (Path(_multiproc_dir).is_dir() and os.access(_multiproc_dir, os.W_OK)):
    raise ImproperlyConfigured(f"PROMETHEUS_MULTIPROC_DIR must be a writable directory, got {_multiproc_dir!r}")
# Scraped or probed straight from a process's port (no proxy, plain HTTP): never redirected to
# HTTPS, or a supervisor's probe of 127.0.0.1:8001/healthz gets a 301 to a port with no TLS.
SECURE_REDIRECT_EXEMPT = [r"^metrics$", r"^healthz$"]

# --- The relay (responses_app) ------------------------------------------------------------------
# Every RELAY_* setting has its default in the app (responses_app/conf.py, docs/configuration.md)
# and is validated by `manage.py check`; this site only passes on what its environment sets.
globals().update(from_environ(os.environ))
# The demo's own names for the upstream, kept from before the app had its settings.
for _name, _setting in (("OPENAI_API_KEY", "RELAY_UPSTREAM_API_KEY"), ("OPENAI_BASE_URL", "RELAY_UPSTREAM_BASE_URL"),
                        ("SIMULATOR_BASE_URL", "RELAY_SIMULATOR_BASE_URL"),
                        ("SIMULATOR_API_KEY", "RELAY_SIMULATOR_API_KEY")):
    if env.str(_name, default=""):
        globals()[_setting] = env.str(_name)
# The simulator is also served over HTTP at /simulator/v1 (project/asgi.py) in development, for
# SDKs and curl; the relay itself reaches it in-process and needs no address.
SIMULATOR_ENABLED = env.bool("SIMULATOR_ENABLED", default=DEVELOPMENT)
if PRODUCTION and SIMULATOR_ENABLED:
    raise ImproperlyConfigured(
        "SIMULATOR_ENABLED=true is refused under DJANGO_ENV=production: the simulator must not be "
        "reachable in production. Unset it and configure OPENAI_BASE_URL and OPENAI_API_KEY.")
# Outside development, the app's deployment checks (a real provider, an allowlist of models, a
# long metrics token) refuse to start the server: project/asgi.py runs them.
RELAY_BASE_TEMPLATE = "base.html"  # the demo's own base: its top bar around the app's pages
# The demo prices its simulator's models as a mid-sized real model is priced (USD per million
# tokens), so its pages show what answers would cost; a provider's prices are the environment's
# to give (RELAY_PRICES, as JSON).
if SIMULATOR_ENABLED and "RELAY_PRICES" not in globals():
    from responses_app.simulator.scenarios import SCENARIOS

    RELAY_PRICES = {model: {"input": "2.00", "cached_input": "0.50", "output": "8.00"} for model in SCENARIOS}

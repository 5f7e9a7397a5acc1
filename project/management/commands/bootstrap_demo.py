"""`manage.py bootstrap_demo --address http://HOST:PORT/`: a newcomer's first minute.

In development (the demo's settings.DEVELOPMENT) it creates the account `demo` / `demo` when it does not
exist yet, and prints where to go and how to log in. When RELAY_SIMULATOR_BASE_URL is set to this
server's own `/simulator/v1` (rather than left empty: the embedded simulator, reached in-process),
it checks that it points at the address being served, and warns if not. It adds the demo's presets
of conversation settings (DEMO_PRESETS) that do not exist yet, so Settings › Apply preset has some.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from responses_app.conf import app_settings
from responses_app.models import Preset

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo"
DEMO_PRESETS: tuple[dict[str, Any], ...] = (
    {"name": "Concise", "description": "Short, plain answers.", "temperature": 0.3, "max_output_tokens": 400,
     "instructions": "Answer in at most three short paragraphs, in plain words."},
    {"name": "Careful reasoning", "description": "Thinks longer before answering.", "reasoning_effort": "high",
     "instructions": "Reason step by step, then give the answer and how sure you are."},
)
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host in _LOOPBACK:
        host = "loopback"
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, host, port


def expected_simulator_url(address: str) -> str:
    return address.rstrip("/") + "/simulator/v1"


def simulator_mismatch(address: str) -> str | None:
    """A warning when the relay would look for the simulator somewhere else than `address`."""
    if app_settings.UPSTREAM_BASE_URL or not settings.SIMULATOR_ENABLED or not app_settings.SIMULATOR_BASE_URL:
        return None  # a real upstream, or the embedded simulator reached in-process
    expected = expected_simulator_url(address)
    actual = app_settings.SIMULATOR_BASE_URL.rstrip("/")
    same = _origin(actual) == _origin(expected) and urlsplit(actual).path.rstrip("/") == "/simulator/v1"
    if same:
        return None
    return (f"RELAY_SIMULATOR_BASE_URL is {actual} but this server is {address.rstrip('/')}; the relay would not "
            f"reach its simulator. Set SIMULATOR_BASE_URL={expected} (environment or .env).")


class Command(BaseCommand):
    help = "Create the development demo account (demo/demo) and print how to start."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--address", default="http://127.0.0.1:8000/", help="the address being served")

    def handle(self, *args: Any, **options: Any) -> None:
        address: str = options["address"]
        if not address.endswith("/"):
            address += "/"
        User = get_user_model()  # the host's user model, custom or not
        style = self.style
        if settings.DEVELOPMENT:
            if User.objects.filter(username=DEMO_USERNAME).exists():
                account = f"Log in as {DEMO_USERNAME!r} (the demo account already exists)."
            else:
                User.objects.create_user(DEMO_USERNAME, password=DEMO_PASSWORD, is_staff=True, is_superuser=True)
                account = (f"Created the development account: username {DEMO_USERNAME!r}, password "
                           f"{DEMO_PASSWORD!r} (staff, so Analytics and Admin are open to it too).")
        else:
            account = ("Not in development (DJANGO_ENV): no demo account is created. "
                       "Create one with `manage.py createsuperuser`.")
        made = [str(p["name"]) for p in DEMO_PRESETS if Preset.objects.get_or_create(name=p["name"], defaults=p)[1]]
        self.stdout.write("")
        self.stdout.write(style.SUCCESS(f"  Responses Relay is starting at {address}"))
        self.stdout.write(f"  {account}")
        if made:
            self.stdout.write(f"  Added the presets {', '.join(made)} (a conversation's Settings applies them).")
        self.stdout.write(f"  Open {address} , log in, and send a first prompt; the models are the built-in "
                          "simulator's scenarios unless OPENAI_API_KEY is set.")
        warning = simulator_mismatch(address)
        if warning:
            self.stdout.write(style.WARNING(f"  Warning: {warning}"))
        self.stdout.write("")

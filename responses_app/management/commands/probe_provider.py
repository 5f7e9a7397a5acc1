"""`manage.py probe_provider NAME`: ask one provider, live, what it can do, beside what
RELAY_PROVIDERS claims for it (responses_app/upstream/probe.py). Exits 1 when the settings claim a
capability the provider did not show (the relay would depend on it), 2 when it cannot be reached."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from responses_app.conf import app_settings
from responses_app.upstream.probe import probe


def _word(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "no"


class Command(BaseCommand):
    help = "Probe one provider of RELAY_PROVIDERS live: what it supports against what the settings claim."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="a name in RELAY_PROVIDERS ('default': the single-upstream settings)")
        parser.add_argument("--model", help="the model to ask (default: the provider's first)")
        parser.add_argument("--websocket", action="store_true",
                            help="probe WebSocket mode too (always done when its transport is websocket)")

    def handle(self, *args: Any, **options: Any) -> None:
        name = "" if options["name"] == "default" else options["name"]
        provider = app_settings.provider(name)
        if provider is None:
            known = ", ".join(app_settings.PROVIDERS) or "none; 'default' is the single upstream"
            raise CommandError(f"No provider {options['name']!r} in RELAY_PROVIDERS (known: {known}).")
        model = options["model"] or (provider.models[0] if provider.models else "sim-text" if provider.simulator
                                     else "")
        if not model:
            raise CommandError("This provider lists no models: name one with --model.")
        results = asyncio.run(probe(provider, model, websocket=options["websocket"]))
        self.stdout.write(f"provider {name or 'default'!r}{' (' + provider.title + ')' if provider.label else ''} "
                          f"at {provider.base_url or 'the built-in simulator'}, model {model}")
        self.stdout.write(f"{'capability':<12} {'claimed':<8} {'probed':<7} note")
        for row in results:
            flag = "  <- claimed, not shown" if row.mismatch else ""
            self.stdout.write(f"{row.capability:<12} {_word(row.claimed):<8} {_word(row.found):<7} {row.note}{flag}")
        if results[0].found is not True:
            sys.exit(2)
        if any(row.mismatch for row in results):
            self.stderr.write("The settings claim what this provider did not do: set its supports to match "
                              "(docs/providers.md).")
            sys.exit(1)

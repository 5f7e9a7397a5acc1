"""`manage.py probe_provider NAME` against real servers: a standalone simulator, and one started
--stateless (no retrieve, cancel or chain, as Ollama's server), each as a RELAY_PROVIDERS entry."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from responses_app.simulator.auth import DEV_API_KEY
from tests.servers import free_port, start_simulator, stop

NOTHING = {"retrieve": False, "cancel": False, "background": False, "store": False}


@pytest.fixture(scope="module")
def simulators() -> Iterator[dict[str, str]]:
    started = {"full": start_simulator(), "stateless": start_simulator(30.0, "--stateless")}
    try:
        yield {name: url for name, (_proc, url) in started.items()}
    finally:
        for proc, _url in started.values():
            stop(proc)


def probe(settings: Any, spec: dict[str, Any], *args: str) -> tuple[int, dict[str, list[str]], str]:
    """Exit status, {capability: [claimed, probed]}, and the whole output."""
    settings.RELAY_PROVIDERS = {"p": {"api_key": DEV_API_KEY, "simulator": True, **spec}}
    out, err = StringIO(), StringIO()
    status = 0
    try:
        call_command("probe_provider", "p", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        status = int(exc.code or 0)
    rows = {line.split()[0]: line.split()[1:3] for line in out.getvalue().splitlines()[2:]}
    return status, rows, out.getvalue() + err.getvalue()


def test_a_provider_that_does_all_it_claims(settings: Any, simulators: dict[str, str]) -> None:
    status, rows, text = probe(settings, {"base_url": simulators["full"], "models": ["sim-text"]})
    assert status == 0, text
    assert rows == {"stream": ["-", "yes"], "retrieve": ["yes", "yes"], "store": ["yes", "yes"],
                    "background": ["yes", "yes"], "cancel": ["yes", "yes"], "websocket": ["yes", "-"]}


def test_websocket_mode_is_probed_where_it_is_the_transport(settings: Any, simulators: dict[str, str]) -> None:
    status, rows, text = probe(settings, {"base_url": simulators["full"], "models": ["sim-text"],
                                          "transport": "websocket"})
    assert status == 0 and rows["websocket"] == ["yes", "yes"], text


def test_a_stateless_provider_shows_what_the_settings_overclaim(settings: Any, simulators: dict[str, str]) -> None:
    status, rows, text = probe(settings, {"base_url": simulators["stateless"], "models": ["sim-text"]})
    assert status == 1
    assert rows["stream"] == ["-", "yes"]
    assert {name: rows[name] for name in ("retrieve", "store", "background", "cancel")} == {
        "retrieve": ["yes", "no"], "store": ["yes", "no"], "background": ["yes", "no"], "cancel": ["yes", "no"]}
    assert text.count("claimed, not shown") == 4 and "set its supports to match" in text


def test_honest_settings_for_a_stateless_provider_pass(settings: Any, simulators: dict[str, str]) -> None:
    status, rows, text = probe(settings, {"base_url": simulators["stateless"], "models": ["sim-text"],
                                          "supports": NOTHING})
    assert status == 0, text
    assert rows["retrieve"] == ["no", "no"] and rows["cancel"] == ["no", "no"]


def test_an_unreachable_provider_and_an_unknown_name(settings: Any) -> None:
    status, rows, text = probe(settings, {"base_url": f"http://127.0.0.1:{free_port()}/v1", "models": ["m"]})
    assert status == 2 and rows["stream"] == ["-", "-"] and "Connect" in text
    with pytest.raises(CommandError, match="No provider 'nope'"):
        call_command("probe_provider", "nope")

"""The committed fixtures are the simulator's own recordings, and every one replays cleanly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.simulator.helpers import check_invariants, parse

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "sim"
FILES = sorted(FIXTURES.glob("*.sse"))


def test_every_scenario_has_a_fixture() -> None:
    from responses_app.simulator.scenarios import SCENARIOS

    assert {p.stem for p in FILES} >= set(SCENARIOS)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_fixture_replays_cleanly(path: Path) -> None:
    pytest.importorskip("responses_app.streaming.replay")
    check_invariants(parse(path.read_bytes()))
    done = subprocess.run(
        [sys.executable, "manage.py", "replay", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_fixtures_are_up_to_date(tmp_path: Path) -> None:
    import asyncio

    from responses_app.management.commands.sim_record import record

    for path in asyncio.run(record(tmp_path)):
        committed = FIXTURES / path.name
        assert committed.read_bytes() == path.read_bytes(), (
            f"{path.name} changed: run `python manage.py sim_record --out tests/fixtures/sim/`"
        )

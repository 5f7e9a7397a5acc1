"""The benchmarks' shared pieces: the list `python -m bench` prints, the results files' notes kept
across runs, the percentile the relay's tables read."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from bench.__main__ import BENCHMARKS, listing, run
from bench.harness import keep_notes, pct


@pytest.mark.parametrize("benchmark", BENCHMARKS, ids=lambda b: b.name)
def test_every_listed_benchmark_has_a_main(benchmark: object) -> None:
    module = importlib.import_module(benchmark.module)  # type: ignore[attr-defined]
    assert callable(module.main)


def test_the_list_gives_one_line_per_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    assert run([]) == 0
    printed = capsys.readouterr().out
    assert printed == listing() + "\n"
    for b in BENCHMARKS:
        assert sum(line.lstrip().startswith(f"{b.name} ") for line in printed.splitlines()) == 1


def test_an_unknown_benchmark_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["nope"]) == 2
    assert "no benchmark 'nope'" in capsys.readouterr().err


def test_a_run_keeps_the_notes_under_its_tables(tmp_path: Path) -> None:
    results = tmp_path / "x.md"
    assert keep_notes(results, "# X\n\n| new |\n") == "# X\n\n| new |\n"  # no file yet
    results.write_text("# X\n\n| old |\n\n## Notes\n\n- why the old table read high\n")
    assert keep_notes(results, "# X\n\n| new |\n") == "# X\n\n| new |\n\n## Notes\n\n- why the old table read high\n"
    results.write_text("# X\n\n| old |\n")
    assert keep_notes(results, "# X\n\n| new |\n") == "# X\n\n| new |\n"


def test_a_relay_results_file_keeps_every_level_two_heading(tmp_path: Path) -> None:
    results = tmp_path / "relay.md"
    results.write_text("# Relay\n\n### 1. Latency\n\n| old |\n\n## An investigation\n\ntext\n")
    assert keep_notes(results, "# Relay\n\n### 1. Latency\n\n| new |\n", marker="\n## ") == (
        "# Relay\n\n### 1. Latency\n\n| new |\n\n## An investigation\n\ntext\n")


def test_percentiles_pick_a_value_of_the_sample() -> None:
    values = [7.0, 1.0, 3.0, 5.0, 2.0, 6.0, 4.0]
    assert (pct(values, 50), pct(values, 90), pct(values, 100)) == (4.0, 7.0, 7.0)
    assert pct([3.0], 99) == 3.0
    assert pct([], 50) != pct([], 50)  # nan

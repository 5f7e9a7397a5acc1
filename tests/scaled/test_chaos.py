"""The chaos run in two minutes (bench/chaos/): the scaled-out layout with requests always in
flight while a worker is killed with kill -9, every worker and web process is restarted with
SIGTERM, and Redis and PostgreSQL are restarted; upstream drops, 429s and tool calls mixed in.
Nothing may be lost: each request's committed text is the upstream's, every viewer ends on it
without its text ever going back, each is counted once, each tool call runs once, each ends as
expected within its bound, and its event log has no hole."""

from __future__ import annotations

import time

import pytest

from bench.chaos import report, schedule
from bench.chaos.checks import holes
from bench.chaos.faults import Window
from bench.chaos.sampler import Sample, Sampler
from bench.chaos.traffic import ChaosViewer, Done, Plan, pause_kinds
from bench.cluster import have_services
from tests.conftest import IN_CI

WALL_S = 150.0


def test_a_hole_in_an_event_log_is_found() -> None:
    assert holes([(0, 9), (10, 19), (20, 30)], 30) == []
    assert holes([(0, 9), (12, 30)], 30) == ["response 0: sequences 10..11 missing"]
    assert holes([(0, 9)], 12) == ["log ends at 9, the stream at 12"]
    # a tool round's continuation starts its own log at 0
    assert holes([(0, 5), (0, 7), (9, 12)], 12) == ["response 1: sequences 8..8 missing"]


def test_a_pause_is_put_down_to_the_fault_in_progress() -> None:
    plan = Plan(0, "text", "sim-long", {}, 1, "completed", 60)
    viewer = ChaosViewer("r", 1, first_text_at=100.0, last_text_at=130.0, max_text_gap_s=9.0, small_max_s=0.1,
                         gaps=[(110.0, 119.0)])
    done = Done(plan, "r", "c", 99.0, 131.0, viewers=[viewer])
    kill = Window(schedule.KILL9, 109.0, 126.0)
    redis = Window(schedule.REDIS, 125.0, 129.0)
    assert pause_kinds(done, [kill, redis]) == {schedule.KILL9: 9.0, schedule.REDIS: 0.1}
    assert pause_kinds(done, []) == {schedule.NONE: 9.0}


def test_the_longest_pauses_are_listed_under_each_fault() -> None:
    plan = Plan(0, "text", "sim-long", {}, 1, "completed", 60)
    gaps = [(110.0, 119.0), (127.0, 128.5), (140.0, 140.6)]  # in the kill -9, in the restart, in none
    viewer = ChaosViewer("r", 1, first_text_at=100.0, last_text_at=150.0, gaps=gaps,
                         trail=[(127.2, "closed 1012"), (127.3, "connecting to :2"), (128.5, "snapshot r5->r9"),
                                (135.0, "text")])
    done = Done(plan, "request-1", "c", 99.0, 151.0, viewers=[viewer])
    result = report.Result("", 1, 1, 1, [], [Window(schedule.KILL9, 109.0, 126.0),
                                             Window(schedule.ROLLING_WORKER, 126.5, 129.0)],
                           [done], [], {}, {}, {}, {}, [], ((0.0,), (0.0,)), 0.0, 100.0, lags=[0.0, 0.01, 0.4])
    lines = report.longest_pauses(result)
    assert [line for line in lines if not line.startswith("  ")] == [
        "- kill -9 worker:", "- rolling restart, a worker:", "- none:"]
    restart = lines[lines.index("- rolling restart, a worker:") + 1]
    assert restart == ("  - 1.50 s from 27.0 s (`request-` text, :1): +0.20 closed 1012, +0.30 connecting to :2, "
                       "+1.50 snapshot r5->r9"), "with what the viewer's connection did within it"
    assert "400 ms at most" in report.lag_line(result)


def test_cpu_is_counted_per_role_and_starts_again_with_a_new_process() -> None:
    samples = [Sample(0.0, {}, {}, {}, 0, {"worker-1": (10, 5.0), "web-1": (20, 1.0)}),
               Sample(5.0, {}, {}, {}, 0, {"worker-1": (10, 7.5), "web-1": (20, 1.5)}),
               Sample(10.0, {}, {}, {}, 0, {"worker-1": (11, 0.5), "web-1": (20, 2.0)}),  # worker-1 restarted
               Sample(20.0, {}, {}, {}, 0, {"worker-1": (11, 3.5), "web-1": (20, 2.0)})]
    sampler = Sampler(cluster=None, t0=0.0, samples=samples)  # type: ignore[arg-type]
    use = sampler.cpu_use()
    assert use["worker-1"] == {"seconds": 5.5, "busiest": 0.5, "mean": 0.275}
    assert use["web-1"] == {"seconds": 1.0, "busiest": 0.1, "mean": 0.05}


def test_the_schedule_has_every_kind_of_fault_and_is_seeded() -> None:
    short = schedule.build(2, seed=3, workers=2)
    assert {f.kind for f in short} == {schedule.KILL9, schedule.ROLLING, schedule.REDIS, schedule.POSTGRES}
    hour = schedule.build(60, seed=3, workers=2)
    assert hour == schedule.build(60, seed=3, workers=2)
    kinds = [f.kind for f in hour]
    assert kinds.count(schedule.ROLLING) == 3 and kinds.count(schedule.KILL9) >= 10, hour
    assert all(f.at_s < 59 * 60 for f in hour)
    rolling = schedule.only(schedule.ROLLING, 4, seed=3, workers=2)
    assert [(f.kind, f.at_s) for f in rolling] == [(schedule.ROLLING, 24.0), (schedule.ROLLING, 144.0)], \
        "one every ROLLING_EVERY_S: room after each"
    assert schedule.only(schedule.NONE, 4, seed=3, workers=2) == [], "the baseline: no fault at all"


@pytest.mark.services
@pytest.mark.timeout(WALL_S + 60)
def test_two_minutes_of_faults_lose_nothing() -> None:
    missing = have_services()
    if missing:
        if IN_CI:
            pytest.fail(f"CI must be able to start private services: {missing}")
        pytest.skip(missing)
    from bench.chaos import run

    started = time.monotonic()
    # the load's two minutes less the cluster's start and the drain, to stay within WALL_S
    result = run(minutes=1.75, streams=12, seed=3, tokens=(60, 200), tokens_per_s=30.0, command="test_chaos")
    wall = time.monotonic() - started
    text = report.markdown(result)
    assert {w.kind for w in result.windows} == {schedule.KILL9, schedule.ROLLING_WORKER, schedule.ROLLING_WEB,
                                                schedule.REDIS, schedule.POSTGRES}, text
    assert result.injector_errors == [], text
    assert {name: lost for name, (lost, _) in result.lost.items()} == dict.fromkeys(report.INVARIANTS, 0), text
    assert all(total > 0 for _, total in result.lost.values()), text
    assert wall <= WALL_S, f"{wall:.0f} s\n{text}"
    assert {"web-1", "worker-1", "simulator", "redis", "postgresql"} <= set(result.cpu), text
    assert "## CPU" in text and all(c["seconds"] > 0 for c in result.cpu.values()), text

"""The checks made once the load has ended, over every request at once: counted once in the
analytics, each tool call run once, and each event log whole. (The text and the viewers are checked
as each request ends: bench/chaos/traffic.py.)"""

from __future__ import annotations

import json
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

from bench.chaos.traffic import Done
from bench.cluster import Cluster
from bench.harness import PY, ROOT

ANALYTICS = """
import json
from responses_app.ops import analytics
period = analytics.DateRange.last_days(3)
print(json.dumps({"by_status": dict(analytics.totals_by(period, "status")),
                  "per_day": sum(day["total"] for day in analytics.per_day(period, "status"))}))
"""


def analytics_totals(cluster: Cluster) -> dict[str, object]:
    """What the analytics page counts, asked of the app itself (manage.py shell on the cluster's
    database)."""
    env = dict(cluster.base_env)
    out = subprocess.run([PY, "manage.py", "shell", "-c", ANALYTICS], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def counted_once(cluster: Cluster, done: list[Done]) -> dict[str, object]:
    """Each logical request is one row, and the analytics count each once: per request, its
    client_request_id has exactly one row; overall, the analytics' totals by status are ours."""
    assert cluster.postgres is not None
    rows = dict(cluster.postgres.query("SELECT client_request_id, count(*) FROM responses_app_responserequest "
                                       "GROUP BY 1"))
    submitted = [d for d in done if d.request_id]
    for d in submitted:
        if rows.get(d.client_request_id, 0) != 1:
            d.violations.setdefault("analytics", []).append(f"{rows.get(d.client_request_id, 0)} rows")
    totals = analytics_totals(cluster)
    ours = Counter(d.status for d in submitted)
    return {"analytics_by_status": totals["by_status"], "ours_by_status": dict(ours),
            "analytics_total": totals["per_day"], "ours_total": len(submitted), "rows": sum(rows.values()),
            "agree": totals["by_status"] == dict(ours) and totals["per_day"] == len(submitted)}


def tools_once(cluster: Cluster, done: list[Done], tool_log: Path) -> dict[str, int]:
    """For each request that called tools: as many ToolCall rows, all done, as the upstream's
    function calls, and as many runs in the tools' own log (bench/chaos/tools.py)."""
    assert cluster.postgres is not None
    runs: Counter[str] = Counter()
    if tool_log.exists():
        for line in tool_log.read_text().splitlines():
            runs[json.loads(line)["request"]] += 1
    rows = {str(r): (int(n), int(ok)) for r, n, ok in cluster.postgres.query(
        "SELECT request_id, count(*), count(*) FILTER (WHERE status = 'done') FROM responses_app_toolcall GROUP BY 1")}
    expected_total = 0
    for d in done:
        if not d.request_id or d.plan.kind != "tools":
            continue
        expected_total += d.function_calls
        count, ok = rows.get(d.request_id, (0, 0))
        ran = runs.get(d.request_id, 0)
        if d.function_calls == 0:
            d.violations.setdefault("tools", []).append("the upstream made no function call")
        if (count, ok, ran) != (d.function_calls, d.function_calls, d.function_calls):
            d.violations.setdefault("tools", []).append(
                f"{d.function_calls} calls: {count} rows, {ok} done, run {ran} times")
    return {"calls": expected_total, "runs": sum(runs.values()), "rows": sum(n for n, _ in rows.values()),
            "unattributed_runs": runs.get("-", 0)}


def event_logs_whole(cluster: Cluster, done: list[Done]) -> None:
    """Each request's stored event log covers every sequence number up to its last (per response:
    a tool round's continuation starts again at 0)."""
    assert cluster.postgres is not None
    batches: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for request_id, first, last in cluster.postgres.query(
            "SELECT request_id, first_sequence, last_sequence FROM responses_app_eventrecord "
            "WHERE first_sequence IS NOT NULL ORDER BY request_id, id"):
        batches[str(request_id)].append((int(first), int(last)))
    ends = {str(r): n for r, n in cluster.postgres.query(
        "SELECT id, last_sequence_number FROM responses_app_responserequest")}
    for d in done:
        if not d.request_id or d.plan.kind == "429":
            continue
        problems = holes(batches.get(d.request_id, []), ends.get(d.request_id))
        if problems:
            d.violations.setdefault("event log", []).extend(problems[:3])


def holes(batches: list[tuple[int, int]], last: int | None) -> list[str]:
    """Missing sequence numbers in batches stored in order; a batch starting again at 0 begins the
    next response's log."""
    runs: list[list[tuple[int, int]]] = []
    for first, end in batches:
        if not runs or first == 0:
            runs.append([])
        runs[-1].append((first, end))
    problems = []
    for i, run in enumerate(runs):
        covered = -1
        for first, end in sorted(run):
            if first > covered + 1:
                problems.append(f"response {i}: sequences {covered + 1}..{first - 1} missing")
            covered = max(covered, end)
        if i == len(runs) - 1 and last is not None and covered < last:
            problems.append(f"log ends at {covered}, the stream at {last}")
    return problems

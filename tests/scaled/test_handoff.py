"""A deploy without a pause: a `relayworker` stopped with SIGTERM hands its streams over. It
stops reading, commits what it applied, releases its leases and tells the other workers, and one
of them resumes each stream from the upstream after its last applied sequence number at once,
instead of after the lease ran out and a sweep found it. Every viewer ends on the upstream's
exact text, with no delta lost or shown twice."""

from __future__ import annotations

import signal
import time

from bench.cluster import Cluster
from bench.viewers import Load
from tests.scaled.test_survival import assert_whole, explain, flowing, holder

HANDOFF_GAP_S = 1.5  # the longest a viewer may wait for text across the hand-off
STOPPED_WITHIN_S = 5.0  # how long the stopping worker may take to exit


async def test_sigterm_hands_the_stream_to_the_other_worker_at_once(cluster: Cluster) -> None:
    load = Load(ports=cluster.web_ports(), session=cluster.session, streams=1, viewers=2, tokens=900,
                tokens_per_s=40, stamp=False, deadline_s=60, seed=600)
    await load.start()
    await flowing(load)
    [name] = await holder(cluster)
    started = time.monotonic()
    cluster.kill(name, signal.SIGTERM)
    stopped_in = time.monotonic() - started
    await load.finish()
    assert_whole(cluster, load)
    summary = explain(cluster, load)
    gaps = [round(v.max_text_gap_s, 2) for v in load.watchers]
    assert max(gaps) <= HANDOFF_GAP_S, f"text stopped for {gaps} s\n{summary}"
    assert stopped_in <= STOPPED_WITHIN_S, f"the worker took {stopped_in:.1f} s to stop\n{summary}"
    assert cluster.servers[name].proc.returncode == 0, summary
    assert "handed over 1 stream" in cluster.log_tail(name, 80), summary
    [request_id] = load.request_ids
    assert cluster.postgres is not None
    segments = cluster.postgres.query(
        "SELECT kind, outcome FROM responses_app_segment WHERE request_id = %s ORDER BY \"index\"", request_id)
    assert [kind for kind, _ in segments] == ["initial", "resume"], (segments, summary)

"""Live operations metrics in the Prometheus text format: every definition, and `GET /metrics`.

Call sites stay one line. What is counted where, and why it is counted once:

- `relay_requests_total{status,model}` and `relay_request_duration_seconds`: at the guarded
  transition that gives a logical request its outcome (services.request_mark_terminal, and
  request_cancel for a request that never started), only when the UPDATE changed the row, so a
  takeover, a reconcile or a second runner never counts a request twice;
- the time-to histograms: where the first response.created, text and tool event are stored, each
  a conditional UPDATE that succeeds once per logical request;
- retries, disconnects and viewer connections: where they are added to the request's row
  (services.request_count), cancels where a Stop is written (services.request_cancel), so the
  counters equal the sums of the database's columns;
- upstream, duplicate, gap and unknown events: the transcript's own counters, added as deltas at
  each checkpoint (`StreamTally`), not per event;
- `relay_patch_lag_seconds`: from the upstream arrival of the oldest change in a patch to the
  websocket send of that patch, for one patch per request every PATCH_LAG_SAMPLE_S (observed by
  each viewer that sends it), never per event; wall-clock time, so it crosses processes
  (fanout.py carries the stamp).

Labels are of low cardinality only: a status, a model from a bounded set (`model_label`), a
safety mode and result. Never a user, request or response id.

Several processes (web and `manage.py relayworker`) share one PROMETHEUS_MULTIPROC_DIR; each
writes its own files there and any process's `/metrics` adds them up (docs/metrics.md).

May import: Django (settings, http), prometheus_client, the simulator's scenario names; nothing of
the relay or the models.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import time
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils.crypto import constant_time_compare
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from prometheus_client import generate_latest as _generate_latest

from ..conf import app_settings

MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))

# Seconds: from a submit to the first response.created or text (model latency, queueing included),
# and a whole request (tool rounds and approvals included, up to RELAY_REQUEST_DEADLINE_S).
_LATENCY = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, float("inf"))
_DURATION = (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 900, float("inf"))
_LAG = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 1, 2, 5, 10, float("inf"))

TIME_TO_CREATED = Histogram("relay_time_to_created_seconds",
                            "From the request's creation to the upstream's response.created.", buckets=_LATENCY)
TIME_TO_FIRST_TOKEN = Histogram("relay_time_to_first_token_seconds",
                                "From the request's creation to its first answer text.", buckets=_LATENCY)
TIME_TO_FIRST_TOOL_EVENT = Histogram("relay_time_to_first_tool_event_seconds",
                                     "From the request's creation to its first tool event.", buckets=_LATENCY)
REQUEST_DURATION = Histogram("relay_request_duration_seconds",
                             "From the request's creation to its outcome, once per logical request.",
                             buckets=_DURATION)
PATCH_LAG = Histogram("relay_patch_lag_seconds",
                      "From the upstream arrival of a patch's oldest change to its websocket send.", buckets=_LAG)

REQUESTS = Counter("relay_requests", "Logical requests by outcome, each counted once.", ["status", "model"])
UPSTREAM_EVENTS = Counter("relay_upstream_events", "Events parsed from upstream streams.")
DUPLICATE_EVENTS = Counter("relay_duplicate_events", "Events whose sequence number was already applied.")
SEQUENCE_GAPS = Counter("relay_sequence_gaps", "Sequence gaps given up on (events missing for good).")
UNKNOWN_EVENTS = Counter("relay_unknown_events", "Events of a type the relay does not know (passed over).")
MALFORMED_EVENTS = Counter("relay_malformed_events", "SSE events that were not JSON, or were too large.")
STREAM_DISCONNECTS = Counter("relay_stream_disconnects", "Upstream streams that closed without a terminal event.")
RETRIES = Counter("relay_retries", "Upstream segments started again: resumes, HTTP retries, full-context "
                                   "retries, takeovers.")
CANCELS = Counter("relay_cancels", "Stops written (one per request, however many tabs press it).")
VIEWER_CONNECTIONS = Counter("relay_viewer_connections", "Websocket viewers that connected to a request.")
VIEWER_RESYNCS = Counter("relay_viewer_resyncs", "Snapshots sent to a viewer after its first (gaps, overflows).")
FANOUT_LOST = Counter("relay_fanout_lost_messages", "Fan-out messages from another process noticed lost on the "
                                                    "way (their requests' viewers resynced).")
SAFETY_VERDICTS = Counter("relay_safety_verdicts", "Safety policy verdicts.", ["mode", "result"])

# In several processes: live* gauges add up (or take the worst of) the processes that are alive.
STREAMS_IN_FLIGHT = Gauge("relay_streams_in_flight", "Runners holding a request's lease.",
                          multiprocess_mode="livesum")
VIEWERS = Gauge("relay_viewers", "Websocket viewers attached to a request.", multiprocess_mode="livesum")
EVENT_LOOP_LAG = Gauge("relay_event_loop_lag_seconds",
                       "How late a 100 ms sleep of the event loop woke, sampled while streams run.",
                       multiprocess_mode="livemax")

# The database's counter columns, as services.request_count adds them, and the counters they feed.
_ROW_COUNTERS = {"retries": RETRIES, "disconnects": STREAM_DISCONNECTS, "viewer_connections": VIEWER_CONNECTIONS}
# The transcript's counters (Transcript.counters()) and theirs.
_STREAM_COUNTERS = {"events": UPSTREAM_EVENTS, "duplicates": DUPLICATE_EVENTS, "gaps": SEQUENCE_GAPS,
                    "unknown_events": UNKNOWN_EVENTS, "malformed_events": MALFORMED_EVENTS}
SAFETY_RESULTS = frozenset({"passed", "flagged", "error"})
OTHER_MODEL = "other"
ARRIVED = "_arrived"  # a patch message's key (never serialised): when its oldest change arrived
# One patch per request per this long is stamped: observing every patch for every viewer cost
# more per event than the whole core (bench/README.md, metrics).
PATCH_LAG_SAMPLE_S = 0.25


# --- the call sites ---------------------------------------------------------------------------------

def model_label(model: str) -> str:
    """A bounded label: an allowed model, a simulator scenario, or "other" (a user may send any string)."""
    if model in app_settings.ALLOWED_MODELS or any(model in p.models for p in app_settings.PROVIDERS.values()):
        return model
    if not app_settings.ALLOWED_MODELS and app_settings.upstream_is_simulator:
        from ..simulator.scenarios import SCENARIOS

        if model in SCENARIOS:
            return model
    return OTHER_MODEL


def request_ended(*, status: str, model: str, duration_s: float) -> None:
    """A logical request got its outcome (call only when the guarded transition succeeded)."""
    REQUESTS.labels(status=status, model=model_label(model)).inc()
    REQUEST_DURATION.observe(max(duration_s, 0.0))


def request_reached(field: str, seconds: float) -> None:
    """A request's first response.created, text or tool event (stored once per logical request)."""
    _FIRSTS[field].observe(max(seconds, 0.0))


_FIRSTS = {"upstream_created_at": TIME_TO_CREATED, "first_text_at": TIME_TO_FIRST_TOKEN,
           "first_tool_at": TIME_TO_FIRST_TOOL_EVENT}


def row_counted(increments: dict[str, int]) -> None:
    """What services.request_count added to a request's row."""
    for name, n in increments.items():
        counter = _ROW_COUNTERS.get(name)
        if counter is not None and n > 0:
            counter.inc(n)


def safety_verdict(mode: str, result: str) -> None:
    """One verdict of the safety policy. `mode` is the policy's (a handful of names, never an id);
    `result` is passed, flagged or error."""
    if result not in SAFETY_RESULTS:
        raise ValueError(f"a safety verdict is one of {sorted(SAFETY_RESULTS)}, got {result!r}")
    if not mode or len(mode) > 32:
        raise ValueError(f"a safety mode is a short name, got {mode!r}")
    SAFETY_VERDICTS.labels(mode=mode, result=result).inc()


class StreamTally:
    """What one runner has added to the event counters: the deltas of its transcript's counters,
    reported at each checkpoint. A runner that took a request over starts from the counters it
    restored from the event log (the runner before it counted those). So the totals equal the
    database's columns, except after a runner died: the events it counted after its last committed
    checkpoint are streamed again to its successor and counted twice."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen = dict.fromkeys(_STREAM_COUNTERS, 0)

    def start_from(self, counters: dict[str, Any]) -> None:
        self._seen = {name: int(counters.get(name) or 0) for name in _STREAM_COUNTERS}

    def report(self, counters: dict[str, Any]) -> None:
        seen = self._seen
        for name, counter in _STREAM_COUNTERS.items():
            now = counters.get(name) or 0
            if now > seen[name]:
                counter.inc(now - seen[name])
                seen[name] = now


def patch_sent(arrived: float) -> None:
    """A patch stamped with ARRIVED went out on a websocket."""
    PATCH_LAG.observe(max(time.time() - arrived, 0.0))


# --- the exposition ---------------------------------------------------------------------------------

def render() -> bytes:
    """The text format: this process's metrics, or with PROMETHEUS_MULTIPROC_DIR every process's."""
    if MULTIPROCESS:
        _forget_dead_processes()
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return _generate_latest(registry)
    return _generate_latest(REGISTRY)


def _mark_dead() -> None:
    """A process that exits drops out of the live gauges at once."""
    multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def _forget_dead_processes() -> None:
    """A process killed (kill -9, OOM) never ran its atexit: its live gauges' files name its pid;
    drop those of pids that no longer run (the directory is per machine, so pids are too)."""
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    pids: set[int] = set()
    for name in os.listdir(directory):
        if name.startswith("gauge_live") and name.endswith(".db"):
            digits = name.rsplit("_", 1)[-1][:-3]
            if digits.isdigit():
                pids.add(int(digits))
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
        except PermissionError:
            pass  # alive, another user's


if MULTIPROCESS:
    atexit.register(_mark_dead)

_FORWARDING_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO", "HTTP_X_FORWARDED_HOST",
                       "HTTP_X_REAL_IP", "HTTP_FORWARDED")


def _loopback(request: HttpRequest) -> bool:
    """A client on this machine, not relayed: a proxy in front (nginx on loopback, or Daphne's
    --proxy-headers taking the address from X-Forwarded-For, which a client can forge) sets one of
    the forwarding headers, and such a request never passes as loopback."""
    if any(name in request.META for name in _FORWARDING_HEADERS):
        return False
    try:
        return ipaddress.ip_address(str(request.META.get("REMOTE_ADDR") or "")).is_loopback
    except ValueError:
        return False


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    token = app_settings.METRICS_TOKEN
    if token:
        scheme, _, presented = str(request.META.get("HTTP_AUTHORIZATION") or "").partition(" ")
        if scheme.lower() != "bearer" or not constant_time_compare(presented.strip(), token):
            response = HttpResponse("A bearer token (RELAY_METRICS_TOKEN) is required.\n", status=401,
                                    content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    elif not _loopback(request):
        return HttpResponse("Metrics are served to loopback clients only; set RELAY_METRICS_TOKEN to scrape "
                            "from elsewhere.\n", status=403, content_type="text/plain")
    response = HttpResponse(render(), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response


urlpatterns = [path("", metrics_view, name="metrics")]

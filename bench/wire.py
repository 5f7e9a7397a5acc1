"""Websocket bytes per answer, and the latency they cost: the wire format before and after, side by side.

    python -m bench wire                  # ~3 minutes; writes bench/results/wire.md
    python -m bench wire --quick          # 400-delta answers; results file not written
    python -m bench wire --baseline REF   # the "before" tree: any commit (default: BASELINE)

Two relays run at once, each ONE Daphne process (development settings, DEBUG off, in-memory layer,
in-process runner) on its own temporary PostgreSQL database (SQLite when PostgreSQL is not
reachable): the *before* tree, exported from git (`git archive REF`, run only, never modified) and
this tree. A standalone simulator feeds each. For each pace (30 and 200 deltas/s) each relay
gets a 2,000-delta `sim-long` answer with one real websocket viewer, all four at once; then the
same again with stamped deltas, for the latency:

* *bytes*: the same seed on both relays, so the same text; every frame the viewer receives from
  connect to `terminal` is counted (payload, and payload + the frame's header as a server sends
  it: 2, 4 or 10 bytes), against the final text's UTF-8 bytes. The viewer applies every patch
  with `view.apply_patch` (`wire.decode` reads both formats) and must reach the text the API
  returns. *deflate*: the same frames through one zlib stream per socket with a sync flush per
  message, as permessage-deflate with context takeover would send them, and its CPU per frame.
* *latency*: `sim.stamp` puts each delta's emit wall-clock time into its text (so these answers'
  bytes are not counted); for every delta, receipt - emit. A stamp makes each delta several
  times longer, and the after tree batches a slow flow by characters, so its stamped answers go
  through a second Daphne of the same tree whose RELAY_FLUSH_MIN_CHARS is scaled by as much
  (bench/stamps.py): its patches then carry as many deltas as the plain answer's (the table shows both).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import (
    ROOT,
    Procs,
    base_env,
    cpu_seconds,
    database,
    django_env,
    environment,
    fmt_ms,
    keep_notes,
    make_session,
    migrate,
    pct,
    reachable,
    start_server,
    start_simulator,
)
from bench.stamps import FLUSH_MIN_CHARS, STAMP, stamped_min_chars
from responses_app.streaming.view import apply_patch
from responses_app.streaming.wire import PROTOCOL, appended, decode

RESULTS = ROOT / "bench" / "results" / "wire.md"
BASELINE = "814e58e"  # the last commit with protocol 1 (JSON object patches, 50 ms leading-edge flushes)
PACES = (30, 200)
TARGETS = {30: 2.0, 200: 1.5}  # bytes / text, the bound per pace
LATENCY_LIMIT_MS = 250.0


def frame_header(length: int) -> int:
    """Bytes of a server-to-client (unmasked) websocket frame header (RFC 6455, 5.2)."""
    return 2 if length < 126 else 4 if length < 65536 else 10


@dataclass
class Answer:
    tree: str
    pace: int
    stamped: bool
    frames: list[bytes] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)  # ms, receipt - emit, per delta
    resyncs: int = 0
    text: str = ""  # the final text, from the API
    viewer_text: str = ""  # the text the viewer's own view reached
    seconds: float = 0.0
    error: str = ""

    @property
    def payload(self) -> int:
        return sum(len(f) for f in self.frames)

    @property
    def wire(self) -> int:
        return sum(len(f) + frame_header(len(f)) for f in self.frames)

    @property
    def text_bytes(self) -> int:
        return len(self.text.encode())


def deflated(frames: list[bytes]) -> tuple[int, float]:
    """permessage-deflate with context takeover (RFC 7692): bytes on the wire, CPU µs per frame."""
    compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -zlib.MAX_WBITS)
    total = 0
    started = time.process_time()
    for frame in frames:
        data = compressor.compress(frame) + compressor.flush(zlib.Z_SYNC_FLUSH)
        body = len(data) - 4  # the trailing 00 00 ff ff is not sent
        total += body + frame_header(body)
    cpu = time.process_time() - started
    return total, cpu / max(len(frames), 1) * 1e6


async def follow(port: int, session: str, answer: Answer, tokens: int, seed: int) -> None:
    import httpx
    from websockets.asyncio.client import connect
    from websockets.typing import Origin

    token = "x" * 32
    metadata = {"sim.tokens": str(tokens), "sim.tokens_per_s": str(answer.pace), "sim.seed": str(seed)}
    if answer.stamped:
        metadata["sim.stamp"] = "true"
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60,
                                 cookies={"sessionid": session, "csrftoken": token},
                                 headers={"X-CSRFToken": token}) as http:
        created = await http.post("/api/requests", json={
            "input": "Tell me something long.", "model": "sim-long", "client_request_id": uuid.uuid4().hex,
            "background": False, "metadata": metadata})
        created.raise_for_status()
        request_id = created.json()["id"]
        started = time.time()
        view: dict[str, Any] | None = None
        async with connect(f"ws://127.0.0.1:{port}/ws/requests/{request_id}/?v={PROTOCOL}",
                           origin=Origin(f"http://127.0.0.1:{port}"),
                           additional_headers={"Cookie": f"sessionid={session}"},
                           compression=None, proxy=None, open_timeout=30, max_size=None) as ws:
            async with asyncio.timeout(tokens / answer.pace * 3 + 60):
                while True:
                    raw = await ws.recv(decode=False)
                    now = time.time()
                    answer.frames.append(raw)
                    message = decode(raw)
                    kind = message["type"]
                    answer.kinds[kind] = answer.kinds.get(kind, 0) + 1
                    if kind == "snapshot":
                        view = message["view"]
                    elif kind == "patch":
                        assert view is not None, "a patch before the snapshot"
                        if message["revision"] <= view["revision"]:
                            continue
                        if not apply_patch(view, message):
                            answer.resyncs += 1
                            await ws.send('{"type":"snapshot"}')
                            continue
                        if answer.stamped:
                            for text in appended(message["ops"]):
                                answer.latencies.extend((now - float(s)) * 1000 for s in STAMP.findall(text))
                    elif kind == "terminal":
                        break
        answer.seconds = time.time() - started
        assert view is not None
        answer.viewer_text = "".join(b["text"] for b in view["blocks"] if b["kind"] == "text")
        final = (await http.get(f"/api/requests/{request_id}")).json()
        answer.text = "".join(b["text"] for b in final["view"]["blocks"] if b["kind"] == "text")


# --- processes -----------------------------------------------------------------------------------


def export_tree(ref: str, into: Path) -> str:
    """`git archive` of REF into a directory; returns the commit's short hash and subject."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                            capture_output=True, text=True)
    if commit.returncode != 0:
        raise SystemExit(f"bench wire: no commit {ref!r} here (--baseline): {commit.stderr.strip()}")
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", commit.stdout.strip()], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
    archive.wait()
    return subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %s", commit.stdout.strip()],
                          capture_output=True, text=True, check=True).stdout.strip()


def start_relay(procs: Procs, tree: Path, env: dict[str, str], log: Path,
                session: str | None = None) -> tuple[subprocess.Popen[Any], int, str]:
    """Serve a tree with Daphne (first migrating its database and making a session, unless given
    one); (process, port, session key)."""
    env = dict(env, PYTHONPATH=str(tree))
    if session is None:
        migrate(env, cwd=tree)
        session = make_session(env, cwd=tree)
    proc, port = start_server(procs, "project.asgi:application", env, log, cwd=tree, server="daphne")
    return proc, port, session


def answer_all(relays: dict[str, tuple[subprocess.Popen[Any], int, str]], answers: list[Answer], tokens: int,
               seeds: dict[int, int]) -> None:
    """Every answer at once, each followed by one viewer; failures are kept in `Answer.error`."""
    async def one(a: Answer) -> None:
        _, port, session = relays[a.tree]
        try:
            await follow(port, session, a, tokens, seeds[a.pace] + a.stamped)
        except Exception as exc:
            a.error = f"{type(exc).__name__}: {exc}"[:300]

    async def every() -> None:
        await asyncio.gather(*(one(a) for a in answers))

    asyncio.run(every())


def run(baseline: str, tokens: int, use_postgres: bool, log_dir: Path) -> dict[str, Any]:
    procs = Procs()
    shell_env = {k: v for k, v in base_env(PYTHONUNBUFFERED="1").items() if k != "PYTHONPATH"}
    old_tree = Path(tempfile.mkdtemp(prefix="relay-wire-before-"))
    result: dict[str, Any] = {"baseline": export_tree(baseline, old_tree)}
    t0 = time.monotonic()
    try:
        with database(use_postgres) as (old_db, db_desc), database(use_postgres) as (new_db, _):
            result["database"] = db_desc
            try:
                # One simulator per relay: it derives response ids from the seed, and both get the same seeds.
                sims = {tree: start_simulator(procs, shell_env)[1] for tree in ("before", "after")}
                limits = {"RELAY_MAX_CONCURRENT_PER_USER": "1000", "RELAY_SUBMIT_RATE": "1000/s",
                          "RELAY_MAX_SOCKETS_PER_USER": "1000"}
                envs = {"before": django_env(shell_env, old_db, sims["before"], **limits),
                        "after": django_env(shell_env, new_db, sims["after"], **limits)}
                relays = {"before": start_relay(procs, old_tree, envs["before"], log_dir / "before.log"),
                          "after": start_relay(procs, ROOT, envs["after"], log_dir / "after.log")}
                seeds = {pace: uuid.uuid4().int >> 80 for pace in PACES}  # the same text on both relays

                # 1. Bytes: plain answers, both trees at once.
                cpu0 = {tree: cpu_seconds(proc.pid) for tree, (proc, _, _) in relays.items()}
                plain = [Answer(tree, pace, False) for pace in PACES for tree in relays]
                answer_all(relays, plain, tokens, seeds)
                result["cpu"] = {tree: cpu_seconds(proc.pid) - cpu0[tree] for tree, (proc, _, _) in relays.items()}

                # 2. Latency: stamped answers. A stamp adds stamps.STAMP_CHARS to every delta, and the after
                # tree batches a slow flow by characters: its latency relay waits for as many more
                # characters, so that its patches carry as many deltas as the plain answer's did.
                chars = [len(a.text) / tokens for a in plain if a.tree == "after" and a.text]
                min_chars = stamped_min_chars(sum(chars) / len(chars)) if chars else FLUSH_MIN_CHARS
                result["latency_min_chars"] = min_chars
                relays["after"] = start_relay(procs, ROOT, dict(envs["after"], RELAY_FLUSH_MIN_CHARS=str(min_chars)),
                                              log_dir / "after-latency.log", session=relays["after"][2])
                stamped = [Answer(tree, pace, True) for pace in PACES for tree in relays]
                answer_all(relays, stamped, tokens, seeds)
                result["answers"] = plain + stamped
            finally:
                procs.stop_all()
    finally:
        shutil.rmtree(old_tree, ignore_errors=True)
    result["seconds"] = time.monotonic() - t0
    return result


# --- the report ----------------------------------------------------------------------------------


def render(res: dict[str, Any], tokens: int) -> str:
    answers: list[Answer] = res["answers"]
    out: list[str] = []
    out.append(f"### Bytes per answer ({tokens:,}-delta `sim-long` answer, one viewer)\n")
    out.append("| pace | tree | frames | patches | text (UTF-8) | payload | payload / text | with frame headers "
               "| / text | target | deflate (estimate) | / text | deflate CPU per frame | viewer's text = API's |")
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|")
    for a in answers:
        if a.stamped:
            continue
        if a.error:
            out.append(f"| {a.pace}/s | {a.tree} | failed: {a.error[:120]} |" + " |" * 12)
            continue
        target = TARGETS[a.pace]
        ratio = a.wire / a.text_bytes
        z, z_us = deflated(a.frames)
        out.append(f"| {a.pace} deltas/s | {a.tree} | {len(a.frames):,} | {a.kinds.get('patch', 0):,} "
                   f"| {a.text_bytes:,} | {a.payload:,} | {a.payload / a.text_bytes:.2f}x | {a.wire:,} "
                   f"| **{ratio:.2f}x** | <= {target}x: {'met' if ratio <= target else 'MISSED'} "
                   f"| {z:,} | {z / a.text_bytes:.2f}x | {z_us:.1f} µs "
                   f"| {'yes' if a.viewer_text == a.text and a.text else 'NO'} |")
    out.append("")
    out.append("### Added latency (the same answers, stamped: `sim.stamp`)\n")
    out.append("| pace | tree | deltas | patches | deltas / patch | plain answer's deltas / patch | p50 | p90 | p99 "
               "| max | resyncs |")
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    plain = {(a.tree, a.pace): a for a in answers if not a.stamped}
    for a in answers:
        if not a.stamped:
            continue
        if a.error:
            out.append(f"| {a.pace}/s | {a.tree} | failed: {a.error[:120]} |" + " |" * 8)
            continue
        lat = a.latencies
        twin = plain.get((a.tree, a.pace))
        twin_ratio = tokens / max(twin.kinds.get("patch", 0), 1) if twin and not twin.error else float("nan")
        p99 = pct(lat, 99)
        patches = a.kinds.get("patch", 0)
        out.append(f"| {a.pace} deltas/s | {a.tree} | {len(lat):,} | {patches:,} | {len(lat) / max(patches, 1):.1f} "
                   f"| {twin_ratio:.1f} | {fmt_ms(pct(lat, 50))} | {fmt_ms(pct(lat, 90))} "
                   f"| {fmt_ms(p99)}{'' if p99 <= LATENCY_LIMIT_MS else ' ✗'} "
                   f"| {fmt_ms(max(lat, default=float('nan')))} "
                   f"| {a.resyncs} |")
    cpu = res["cpu"]
    out.append(f"\nms, receipt - emit, over every delta (not only each patch's newest); the after tree's stamped "
               f"answers with RELAY_FLUSH_MIN_CHARS={res['latency_min_chars']} (32 scaled by the stamps). Relay CPU "
               f"over the plain answers (4 at once, 2 per relay): before {cpu['before']:.1f} s, after "
               f"{cpu['after']:.1f} s ({cpu['after'] / cpu['before']:.2f}x).\n")
    return "\n".join(out)


HEADER = """# Websocket bytes per answer

Generated by `python -m bench wire` (bench/wire.py) from the repository root (temporary databases on
PostgreSQL at 127.0.0.1:5432, user postgres, or SQLite files with `--sqlite`: this run used
{db}). This run took {seconds:.0f} s.

Machine: {env}.

*before*: `{baseline}` (exported with `git archive`, run as it is). *after*: this tree. Both
relays ran at the same time, each fed by a standalone simulator, one websocket viewer per answer
(websockets, asyncio, in the benchmark's own process): the plain answers at once, then the stamped
ones at once.
*payload*: the frames' text; *with frame headers*: what the server writes for them (2 bytes per
frame under 126 bytes, 4 under 64 KiB), TCP/IP not counted. *deflate (estimate)*: the same frames
compressed as permessage-deflate with context takeover would (zlib, one stream per socket, a sync
flush per frame), not negotiated: Daphne does not offer the extension.

"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench wire")
    parser.add_argument("--quick", action="store_true", help="400-delta answers; does not write the results file")
    parser.add_argument("--baseline", default=BASELINE, help="the commit to compare with (default %(default)s)")
    parser.add_argument("--sqlite", action="store_true", help="temporary SQLite files instead of PostgreSQL")
    args = parser.parse_args(argv)
    tokens = 400 if args.quick else 2000
    log_dir = Path(tempfile.mkdtemp(prefix="relay-wire-logs-"))
    print(environment(), flush=True)
    res = run(args.baseline, tokens, not args.sqlite and reachable(5432), log_dir)
    table = render(res, tokens)
    print()
    print(table)
    failures = [a for a in res["answers"] if a.error]
    for a in failures:
        print(f"{a.tree} {a.pace}/s{' stamped' if a.stamped else ''}: {a.error}  (logs: {log_dir})", file=sys.stderr)
    if not args.quick and not failures:
        RESULTS.write_text(keep_notes(RESULTS, HEADER.format(
            env=environment(), seconds=res["seconds"], baseline=res["baseline"], db=res["database"]) + table + "\n"))
        print(f"\nwrote {RESULTS.relative_to(ROOT)}")
    with contextlib.suppress(OSError):
        if not failures:
            shutil.rmtree(log_dir)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

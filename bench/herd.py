"""Reconnect herd: every viewer of a web process that gets SIGTERM (a rolling deploy) reconnects to
the other at once. How long until each has its view again?

`python -m bench herd [--viewers 100,300] [--per 3]`: the README's scaled-out layout (two web
processes, a relayworker, the standalone simulator, private Redis and PostgreSQL; bench/cluster.py).
For each count, that many viewers (`--per` of them on each of count/per long streams) follow on
web-2; web-2 gets SIGTERM; each viewer reconnects to web-1 at once, with `reconnect=1` as chat.js
does, and with `revision=` (what it shows: the server never sends it an older view). Measured per
viewer from its socket's close: the new socket's handshake, its first message, and the first
message newer than what it showed (its text going on). Results: bench/results/herd.md;
bench/README.md reads them.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import signal
import time
from pathlib import Path
from typing import Any

from bench.cluster import Cluster, have_services
from bench.harness import ROOT, keep_notes, pct

RESULTS = ROOT / "bench" / "results" / "herd.md"
TOKEN = "x" * 32


async def herd(cluster: Cluster, viewers: int, per: int) -> dict[str, Any]:
    import httpx
    from websockets.asyncio.client import connect
    from websockets.typing import Origin

    from responses_app.streaming.wire import PROTOCOL, decode

    first_port, second_port = (cluster.servers[name].port for name in ("web-1", "web-2"))
    ids = []
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{first_port}", timeout=30, headers={"X-CSRFToken": TOKEN},
                                 cookies={"sessionid": cluster.session, "csrftoken": TOKEN}) as http:
        for i in range(max(1, viewers // per)):
            created = await http.post("/api/requests", json={
                "input": "A long answer.", "model": "sim-long", "background": True,
                "metadata": {"sim.tokens_per_s": "20", "sim.tokens": "4000", "sim.seed": str(i)},
                "client_request_id": f"herd-{viewers}-{i}-{time.time()}"})
            created.raise_for_status()
            ids.append(created.json()["id"])
    following = asyncio.Event()
    started = [0]
    total = len(ids) * per
    measured: list[tuple[float, float]] = []
    errors: list[str] = []

    async def viewer(request_id: str) -> None:
        port, closed_at, shown = second_port, None, -1
        while True:
            query = f"&reconnect=1&revision={shown}" if closed_at is not None else ""
            try:
                async with connect(f"ws://127.0.0.1:{port}/ws/requests/{request_id}/?v={PROTOCOL}{query}",
                                   origin=Origin(f"http://127.0.0.1:{port}"), compression=None, proxy=None,
                                   additional_headers={"Cookie": f"sessionid={cluster.session}"},
                                   open_timeout=60, ping_interval=None) as ws:
                    opened = time.monotonic()
                    first = None
                    if closed_at is not None:
                        async for raw in ws:
                            first = first or time.monotonic()
                            if int(decode(raw).get("revision", -1)) > shown:  # its text goes on
                                measured.append((opened - closed_at, first - closed_at, time.monotonic() - closed_at))
                                return
                        return
                    started[0] += 1
                    if started[0] == total:
                        following.set()
                    async for raw in ws:
                        shown = max(shown, int(decode(raw).get("revision", -1)))
            except Exception as exc:
                if closed_at is not None:
                    errors.append(f"{type(exc).__name__}: {exc}"[:120])
                    return
            closed_at, port = time.monotonic(), first_port  # web-2 closed it: to web-1 at once, as chat.js

    tasks = [asyncio.create_task(viewer(request_id)) for request_id in ids for _ in range(per)]
    await asyncio.wait_for(following.wait(), 120)
    stopping = time.monotonic()
    await asyncio.to_thread(cluster.kill, "web-2", signal.SIGTERM)
    stopped_s = time.monotonic() - stopping
    await asyncio.wait(tasks, timeout=120)
    for task in tasks:
        task.cancel()
    cluster.start_web("web-2", port=second_port)  # for the next count
    handshakes, firsts, newer = ([m[i] for m in measured] for i in range(3))
    return {"viewers": total, "reconnected": len(measured), "errors": errors, "stopped_s": stopped_s,
            "handshake": (pct(handshakes, 50), pct(handshakes, 99)),
            "first": (pct(firsts, 50), pct(firsts, 99), max(firsts, default=float("nan"))),
            "newer": (pct(newer, 50), pct(newer, 99), max(newer, default=float("nan"))),
            "per_s": len(measured) / max(firsts, default=float("inf"))}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| viewers | reconnected | handshake p50 / p99 | first message p50 / p99 / max "
             "| text going on p50 / p99 / max | views a second |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['viewers']} | {r['reconnected']} | {r['handshake'][0]:.2f} / {r['handshake'][1]:.2f} s "
                     f"| {r['first'][0]:.2f} / {r['first'][1]:.2f} / {r['first'][2]:.2f} s "
                     f"| {r['newer'][0]:.2f} / {r['newer'][1]:.2f} / {r['newer'][2]:.2f} s | {r['per_s']:.0f} |")
    return "\n".join(lines)


async def run(counts: list[int], per: int) -> list[dict[str, Any]]:
    cluster = Cluster(web=2, workers=1).start()
    try:
        rows = []
        for count in counts:
            rows.append(await herd(cluster, count, per))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
        return rows
    finally:
        cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench herd", description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", default="100,300", help="viewer counts, one herd each")
    parser.add_argument("--per", type=int, default=3, help="viewers per stream")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    missing = have_services()
    if missing is not None:
        print(f"needs private Redis and PostgreSQL (bench/cluster.py): {missing}")
        return 2
    rows = asyncio.run(run([int(c) for c in args.viewers.split(",")], args.per))
    errors = [e for r in rows for e in r["errors"]]
    text = (f"# Reconnect herd\n\n`python -m bench herd --viewers {args.viewers} --per {args.per}` on "
            f"{platform.machine()}, {platform.python_version()}: the viewers of web-2 reconnect to web-1 when "
            f"web-2 gets SIGTERM; times from each viewer's close.\n\n{table(rows)}\n")
    if errors:
        text += "\nErrors: " + "; ".join(sorted(set(errors))[:5]) + "\n"
    args.out.write_text(keep_notes(args.out, text))
    print(f"results: {args.out}")
    return 1 if errors or any(r["reconnected"] < r["viewers"] for r in rows) else 0

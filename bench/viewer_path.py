"""One viewer's per-patch work on the server: the cursor's `offer` (viewers/cursor.py) and the
sender's loop (viewers/sender.py) with an ASGI send that does nothing, so what is measured is the
protocol, not the socket. CPU µs per patch, the median of several rounds; bench/README.md
("Viewer path") has the figures.

    python -m bench viewer [--rounds 7] [--patches 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

BATCH = 50  # patches offered before the sender runs: about one flush's worth for a busy stream


async def one_round(patches: int) -> float:
    from responses_app.viewers.cursor import Cursor
    from responses_app.viewers.sender import Sender

    loop = asyncio.get_running_loop()
    cursor = Cursor(clock=loop.time, later=loop.call_later)
    cursor.snapshot_sent(0)
    sent = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal sent
        sent += 1

    async def close(code: int) -> None:
        pass

    sender = Sender("bench", cursor, send, close)
    sender.start()
    await asyncio.sleep(0)
    revision = 0
    started = time.process_time()
    while revision < patches:
        for _ in range(BATCH):
            revision += 1
            cursor.offer({"type": "patch", "base": revision - 1, "revision": revision}, f"p{revision}")
        while not cursor.outbox.empty():
            await asyncio.sleep(0)
        await asyncio.sleep(0)
    elapsed = time.process_time() - started
    sender.stop()
    if sent != revision:
        raise SystemExit(f"the sender sent {sent} of {revision} patches")
    return elapsed / revision * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench viewer", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--patches", type=int, default=100_000)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    results = [asyncio.run(one_round(args.patches)) for _ in range(args.rounds)]
    print(f"offer + send per patch: median {statistics.median(results):.3f} µs, min {min(results):.3f} µs "
          f"({args.rounds} rounds of {args.patches} patches)")
    return 0

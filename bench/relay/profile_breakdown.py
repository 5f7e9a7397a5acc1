"""Where a relay server's CPU goes: py-spy's collapsed stacks, sorted into the stages of a relayed event.

    python -m bench.relay.profile_breakdown bench/results/relay_profile.txt [--us-per-delta US]

Each sample is given to the first stage whose rule matches a frame of its stack (rules are
ordered most specific first), so the shares add up to 100%. With `--us-per-delta` (the CPU per
relayed delta measured in the same run) each share is also shown as µs per relayed delta.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

# (stage, frame patterns): a sample belongs to the first stage with a pattern in one of its frames.
RULES: list[tuple[str, tuple[str, ...]]] = [
    ("checkpoints and database (other threads)", ("concurrent/futures/thread.py", "psycopg",
                                                  "relay/checkpoint_writer.py", "relay/checkpoints.py", "services.py",
                                                  "django/db")),
    ("websocket send (consumer, ASGI server, socket write)", (
        "RequestConsumer._write", "RequestConsumer.offer", "doWrite", "ws_protocol.py", "autobahn",
        "websockets_impl.py", "websockets_sansio_impl.py", "wsproto_impl.py", "hypercorn", "websockets/",
        "_SelectorSocketTransport.write", "writeSomeData", "sessions.py")),
    ("coalescing and patch serialisation", ("coalescer.py", "relay/patches.py", "Hub.publish")),
    ("core: decode, parse, assemble, view ops", ("responses_app/streaming/",)),
    ("timers and tasks (delivery timer, pacer, lease keeper)", ("Delivery._arm", "Delivery.on_deadline",
                                                                "relay/deadlines.py", "relay/keepers.py",
                                                                "policies.py")),
    ("relay shell (runner step, delivery, event log, hub)", ("relay/delivery.py", "relay/eventlog.py",
                                                             "relay/hub.py", "StreamRunner._after_step")),
    ("upstream read (aiohttp, httpx)", ("aiohttp", "httpx", "httpx_aiohttp", "StreamRunner._read",
                                        "_SelectorSocketTransport._read_ready")),
    ("event loop (select, callbacks, reactor)", ("selectors.py", "base_events.py", "asyncio/events.py",
                                                  "twisted", "uvicorn", "asyncioreactor", "uvloop",
                                                  "asyncio/runners.py", "project/serve.py")),
]
OTHER = "other"


def breakdown(path: Path) -> tuple[Counter[str], int]:
    counts: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        samples = int(n)
        total += samples
        frames = stack.split(";")
        for stage, patterns in RULES:
            if any(p in f for f in frames for p in patterns):
                counts[stage] += samples
                break
        else:
            counts[OTHER] += samples
    return counts, total


def table(path: Path, us_per_delta: float | None = None) -> str:
    counts, total = breakdown(path)
    head = "| stage | share of samples |" + (" µs per relayed delta |" if us_per_delta else "")
    rule = "|---|---:|" + ("---:|" if us_per_delta else "")
    lines = [head, rule]
    for stage in [s for s, _ in RULES] + [OTHER]:
        share = counts[stage] / total if total else 0.0
        lines.append(f"| {stage} | {share:.0%} |" + (f" {share * us_per_delta:.0f} |" if us_per_delta else ""))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.relay.profile_breakdown")
    parser.add_argument("profile", type=Path)
    parser.add_argument("--us-per-delta", type=float, default=0.0)
    args = parser.parse_args()
    print(table(args.profile, args.us_per_delta or None))


if __name__ == "__main__":
    main()

"""`python -m bench` lists the benchmarks; `python -m bench <name> [options]` runs one.

Each benchmark is one module (the relay's, one package) with `main(argv)`; bench/README.md says
how to read each one's results, and bench/results/ holds their latest runs.
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple


class Benchmark(NamedTuple):
    name: str
    module: str
    measures: str
    usage: str


BENCHMARKS = (
    Benchmark("core", "bench.core", "the streaming core's µs per event beside the openai SDK and a floor",
              "[--quick]"),
    Benchmark("relay", "bench.relay.cli", "added latency, CPU per relayed delta, capacity, writes per answer",
              "[--quick] [--only latency,cpu,capacity,writes]"),
    Benchmark("scaled", "bench.scaled", "streams x viewers on one process and scaled out", "[--quick]"),
    Benchmark("wire", "bench.wire", "websocket bytes per answer, an older commit beside this tree",
              "[--quick] [--baseline REF]"),
    Benchmark("storage", "bench.storage", "database bytes per answer, memory per in-flight stream",
              "[--quick] [--only memory]"),
    Benchmark("transport", "bench.transport", "CPU per upstream event for each way of reading it",
              "[--streams 200] [--rounds 1]"),
    Benchmark("writer", "bench.writer", "a checkpoint round's CPU on PostgreSQL, COPY beside INSERT", "[--rounds 60]"),
    Benchmark("metrics", "bench.metrics", "what the live metrics add to the per-event work", ""),
    Benchmark("viewer", "bench.viewer_path", "one viewer's CPU per patch: the cursor's offer and the sender's loop",
              "[--rounds 7]"),
    Benchmark("safety", "bench.safety", "the latency and CPU each safety mode adds", "[--quick] [--pace 50]"),
    Benchmark("markdown", "bench.markdown", "seconds per render of hostile Markdown as it grows, both renderers",
              "[--sizes N,...] [--baseline REF]"),
    Benchmark("render", "bench.render", "the chat page's render cost per frame in Chromium", "[--quick]"),
    Benchmark("simulator", "bench.simulator_throughput", "the simulator's events per second on one core",
              "[--streams 1000]"),
    Benchmark("search", "bench.search", "the conversation search over many MB of turns, before and after its index",
              "[--mb 20]"),
    Benchmark("chaos", "bench.chaos", "invariants per request under a schedule of faults, memory and connections",
              "[--minutes 5] [--streams 30]"),
    Benchmark("herd", "bench.herd", "a rolling deploy's reconnects: every viewer of a stopped web process at once",
              "[--viewers 100,300]"),
    Benchmark("tool_rounds", "bench.tool_rounds", "a 10-round tool conversation over SSE and over WebSocket mode",
              "[--quick]"),
)
BY_NAME = {b.name: b for b in BENCHMARKS}
ALL = ("transport", "core", "relay")  # `python -m bench all`


def listing() -> str:
    width = max(len(f"{b.name} {b.usage}") for b in BENCHMARKS)
    lines = ["python -m bench <name> [options]    (<name> --help: every option; bench/README.md: the results)", ""]
    lines += [f"  {f'{b.name} {b.usage}':<{width}}  {b.measures}" for b in BENCHMARKS]
    lines += ["", f"  {'all':<{width}}  {', '.join(ALL)}, one after another"]
    return "\n".join(lines)


def _run(name: str, argv: list[str]) -> int:
    result = importlib.import_module(BY_NAME[name].module).main(argv)
    return int(result or 0)


def run(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(listing())
        return 0
    if argv[0] == "all":
        return _run("transport", []) or _run("core", argv[1:]) or _run("relay", argv[1:])
    if argv[0] in BY_NAME:
        return _run(argv[0], argv[1:])
    print(f"no benchmark {argv[0]!r}\n\n{listing()}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))

"""What one run of the relay benchmark measures: its sections, loads, windows and servers."""

from __future__ import annotations

from dataclasses import dataclass, field

SECTIONS = ("latency", "cpu", "capacity", "writes")
LAG_LIMIT_MS = 250.0  # a capacity step passes when its p99 lag stays under this


@dataclass
class Plan:
    steps: list[int]
    window: float
    warmup: float
    latency_streams: int = 5
    latency_window: float = 10.0
    tokens_per_s: int = 30
    writes_paces: tuple[int, ...] = (30, 100, 200)
    writes_tokens: int = 2000
    background: bool = False
    sections: tuple[str, ...] = SECTIONS
    cpu_streams: int = 100
    cpu_window: float = 10.0
    baseline: str = ""  # another checkout, whose server is measured beside ours in the CPU section
    server: str = "project.serve"  # the ASGI server ours runs on (harness.ASGI_SERVERS)
    baseline_server: str = "daphne"  # and the baseline checkout's
    baseline_env: dict[str, str] = field(default_factory=dict)  # and its environment (RELAY_COMPILED=false)
    cpu_rounds: int = 1
    targets: tuple[str, ...] = ("ours", "naive")  # the capacity section's relays
    asgi: tuple[str, ...] = ()  # more ASGI servers for our application, measured beside ours in the CPU section
    loadgen: str = "loop"  # "loop": loadgen.py, one receive loop per load process; "tasks": tasks.py, the previous one
    load_procs: int = 2  # load processes per step (loadgen "loop")
    gc_log: bool = False  # log our server's slow garbage collections (bench/gcprobe)
    control: int = 8  # streams the load coordinator reads straight from the simulator, beside the relay's
    burst: bool = False  # after each capacity step's ramp-up, one more socket per stream, all at once
    profile: bool = False  # py-spy flame graph + collapsed stacks of our server, 1 viewer, CPU section's load
    flush_as_stamped: bool = False  # RELAY_FLUSH_MIN_CHARS's default though the deltas are stamped (earlier runs)


def quick() -> Plan:
    """A smoke run: fewer, shorter steps."""
    return Plan(steps=[50, 150], window=4, warmup=2, latency_window=5, writes_paces=(200,))


def full() -> Plan:
    return Plan(steps=[50, 100, 150, 200, 250, 300, 400], window=8, warmup=3)

"""The relay benchmark: added latency, CPU per relayed delta, capacity beside a naive relay, and
database writes per response.

    python -m bench relay            # ~13 minutes; prints the tables, writes bench/results/relay.md
    python -m bench relay --quick    # a smoke run: fewer, shorter steps; results file not written
    python -m bench relay --only cpu,latency,writes --quick   # some sections only

Processes (all started by run.py, each in its own process group, all killed at the end):

* the simulator (`python -m responses_app.simulator --port 0`), with `sim.stamp`: every text delta
  carries the wall-clock time it was queued for the wire, so a viewer computes receipt - emit;
* our relay: ONE server process (`python -m project.serve`; `--server` picks another of
  harness.ASGI_SERVERS), development settings, DEBUG off, the in-memory channel layer, the
  in-process runner, on a temporary PostgreSQL database of its own (created, migrated, dropped;
  a temporary SQLite file when PostgreSQL is not reachable);
* the naive relay (naive.py) as ONE Daphne process, and for the CPU section the bare relay
  (bare.py), the least a relay can do on our stack;
* per step a load coordinator (`python -m bench.relay --role load`, load.py) and its load
  processes (`--role loadpart`, loadgen.py: one receive loop each over its share of the viewers);
* the CPU section's floor reader (`--role floor`, cpu.py) and the database-write probes
  (`--role writes`, writes.py: StreamRunners built directly in a Django process).

The modules: cli.py (options, results file, roles), plan.py (what a run measures), run.py (the
processes and the sections, in order), load.py, loadgen.py and tasks.py (the viewers), cpu.py (the
CPU section), writes.py, report.py (tables and progress lines), naive.py and bare.py (the relays
ours is compared with), profile_breakdown.py (py-spy's stacks sorted into stages).

Memory per in-flight stream is `python -m bench storage --only memory` (bench/storage.py).
"""

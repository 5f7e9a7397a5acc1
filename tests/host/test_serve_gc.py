"""project.serve's garbage-collector tuning (tune_gc): the startup heap frozen out of every full
collection, full collections rarer. Run in a fresh interpreter: the test process's own GC is left alone."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
before = {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}
from project.asgi import application
from project.serve import GC_FULL_AFTER, tune_gc
tune_gc()
after = {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count(), "enabled": gc.isenabled()}
# what is allocated after startup is still collected: a cycle made now is found by a full pass
class Node: pass
a, b = Node(), Node(); a.b, b.a = b, a
del a, b
found = gc.collect()
print(json.dumps({"before": before, "after": after, "full_after": GC_FULL_AFTER, "found": found}))
"""


def test_tune_gc_freezes_the_startup_heap_and_spaces_full_collections() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"DJANGO_ENV": "development", "PATH": "/usr/bin:/bin"}, timeout=120)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    # Django, the settings, the modules: out of every scan (an interpreter may freeze a few of its own first)
    assert r["after"]["frozen"] > r["before"]["frozen"] + 10_000
    assert r["after"]["enabled"]
    assert r["after"]["threshold"][:2] == r["before"]["threshold"][:2]
    assert r["after"]["threshold"][2] == r["full_after"] > r["before"]["threshold"][2]
    assert r["found"] >= 2  # the cycle made after the freeze: still garbage-collected

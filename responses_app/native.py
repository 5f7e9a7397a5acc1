"""The streaming core and the relay's per-chunk modules, compiled with mypyc, used only when current.

    python -m responses_app.native_build            # build into build/native/ unless it is up to date
    python -m responses_app.native_build --strict   # the same, failing when it cannot build (CI)

`make install` builds them (about a minute, with the C compiler the machine has). At import,
`install()` (called by responses_app/__init__.py) puts a finder for the compiled modules ahead of
the interpreted ones, and only if the build's manifest names this interpreter's ABI and every
source's SHA-256 matches the file on disk: a module edited since the build, a missing binary or
RELAY_COMPILED=false runs the whole group interpreted (one warning when stale), never a stale
build. They compile as one group (calls between them are native), so it is all or nothing.

Why: the relay's cost over a bare relay is interpreted Python on the event loop's thread, spread
thinly over the per-chunk path, and compiled it runs fewer instructions a chunk and less CPU per
relayed delta (bench/README.md, relay).
event_types.py, objects.py and schema.py, declarations only, stay interpreted: their TypedDicts'
annotations are read at import (events.py, the safety gate), which a compiled module does not
keep. Compiled classes cannot be patched or subclassed by interpreted code, and arguments are
checked against their annotations at run time (a bytearray where `bytes` is declared raises
TypeError); the test suite runs on them.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "native"
MANIFEST = BUILD / "manifest.json"
GROUP = "responses_app_native"  # the group's shared library: responses_app_native__mypyc

# Everything a relayed chunk passes through in the core and the delivery; nothing that Django,
# Channels or the tests subclass.
RELAY_MODULES = ("delivery", "eventlog", "patches", "checkpointer", "deadlines")
INTERPRETED = ("__init__.py", "event_types.py", "objects.py", "schema.py")  # declarations, read by introspection

logger = logging.getLogger(__name__)
ACTIVE = False  # whether install() put the compiled group in place in this process


def sources() -> dict[str, Path]:
    """Module name: source file, for every module of the group."""
    found = {f"responses_app.streaming.{path.stem}": path
             for path in sorted((ROOT / "responses_app" / "streaming").glob("*.py")) if path.name not in INTERPRETED}
    found.update({f"responses_app.relay.{name}": ROOT / "responses_app" / "relay" / f"{name}.py"
                  for name in RELAY_MODULES})
    return found


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _abi() -> str:
    return f"{sys.implementation.cache_tag}{importlib.machinery.EXTENSION_SUFFIXES[0]}"


def current(manifest: dict[str, object] | None = None) -> tuple[dict[str, Path] | None, str]:
    """The binaries to load (module name: file) when the build is current, else None and why."""
    if manifest is None:
        try:
            manifest = json.loads(MANIFEST.read_text())
        except (OSError, ValueError):
            return None, "not built"
    assert manifest is not None
    if manifest.get("abi") != _abi():
        return None, f"built for {manifest.get('abi')}, not {_abi()}"
    modules = manifest.get("modules")
    if not isinstance(modules, dict) or set(modules) != set(sources()) | {f"{GROUP}__mypyc"}:
        return None, "built from another list of modules"
    binaries: dict[str, Path] = {}
    try:
        for name, entry in modules.items():
            binary = BUILD / entry["binary"]
            if not binary.is_file():
                return None, f"{entry['binary']} is missing"
            if entry["source"] is not None and _digest(ROOT / entry["source"]) != entry["sha256"]:
                return None, f"{entry['source']} changed since the build"
            binaries[name] = binary
    except (KeyError, TypeError, OSError) as exc:  # never a reason for the app not to import
        return None, f"the manifest does not read ({type(exc).__name__}: {exc})"
    return binaries, "current"


class _CompiledFinder(importlib.abc.MetaPathFinder):
    def __init__(self, binaries: dict[str, Path]) -> None:
        self.binaries = binaries

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        binary = self.binaries.get(fullname)
        if binary is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(binary))
        return importlib.util.spec_from_file_location(fullname, binary, loader=loader)


def wanted() -> bool:
    """False when RELAY_COMPILED says not to use the compiled modules."""
    return os.environ.get("RELAY_COMPILED", "").strip().lower() not in ("0", "false", "no", "off")


def install() -> bool:
    """Load the compiled group from here on, if it is current; True when it will be."""
    global ACTIVE
    if not wanted():
        return False
    if ACTIVE:
        return True
    binaries, why = current()
    if binaries is None:
        if why != "not built":
            logger.warning("responses_app: the compiled modules in build/native are not used (%s); running them "
                           "interpreted. `make install` rebuilds them.", why)
        return False
    sys.meta_path.insert(0, _CompiledFinder(binaries))
    ACTIVE = True
    return True

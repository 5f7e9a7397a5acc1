"""Build the compiled group of native.py into build/native/ (`make install` runs it).

    python -m responses_app.native_build [--strict] [--force]

Unless the build is current already (a second): mypyc type-checks and compiles the modules of
`native.sources()` as one group, setuptools builds them with the machine's C compiler, and the
binaries and a manifest of each source's SHA-256 replace build/native at once, the manifest
written last, so an interrupted build is never loaded. Without a compiler the relay runs them
interpreted: this says why and exits 0, unless --strict (CI).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .native import BUILD, GROUP, ROOT, _abi, _digest, current, sources


def build(*, force: bool = False) -> str:
    """Compile the group into build/native/ unless it is current; what was done."""
    if not force and current()[0] is not None:
        return "up to date"
    from mypyc.build import mypycify  # the build's own dependencies: only here
    from setuptools import Distribution

    modules = sources()
    cwd = os.getcwd()
    BUILD.parent.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="native-", dir=BUILD.parent))  # beside it: the rename below stays on one disk
    try:
        os.chdir(ROOT)  # mypy reads its configuration (pyproject.toml) from here
        extensions = mypycify([str(path.relative_to(ROOT)) for path in modules.values()], opt_level="3",
                              group_name=GROUP, target_dir=str(work / "c"))
        distribution = Distribution({"name": "responses-app-native", "ext_modules": extensions})
        command = distribution.get_command_obj("build_ext")
        command.build_lib = str(work / "lib")  # type: ignore[attr-defined]
        command.build_temp = str(work / "tmp")  # type: ignore[attr-defined]
        distribution.run_command("build_ext")
        staged = work / "native"
        staged.mkdir()
        entries: dict[str, dict[str, str | None]] = {}
        for name, path in [*modules.items(), (f"{GROUP}__mypyc", None)]:
            (binary,) = (work / "lib").glob(name.replace(".", "/") + ".*.so")
            target = staged / binary.relative_to(work / "lib")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(binary, target)
            entries[name] = {"binary": str(target.relative_to(staged)),
                             "source": str(path.relative_to(ROOT)) if path else None,
                             "sha256": _digest(path) if path else None}
        # The manifest last: a build interrupted midway is never loaded.
        (staged / "manifest.json").write_text(json.dumps({"abi": _abi(), "modules": entries}, indent=1))
        shutil.rmtree(BUILD, ignore_errors=True)
        staged.rename(BUILD)
    finally:
        os.chdir(cwd)
        shutil.rmtree(work, ignore_errors=True)
    return f"built {len(modules)} modules into {BUILD.relative_to(ROOT)}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    strict = "--strict" in args
    try:
        print(f"compiled modules: {build(force='--force' in args)}")
    except Exception as exc:  # no C compiler, say: the relay runs interpreted, as fast as before this
        print(f"compiled modules: not built ({type(exc).__name__}: {exc}); the relay runs them interpreted",
              file=sys.stderr)
        return 1 if strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

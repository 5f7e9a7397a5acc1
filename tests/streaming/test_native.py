"""The compiled modules (responses_app/native.py): used only when current, and the same as interpreted."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from responses_app import native

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "sim"
EXTENSION = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def _manifest() -> dict[str, object]:
    """A manifest as a build of the current sources would write it."""
    entries: dict[str, dict[str, str | None]] = {
        name: {"binary": f"{name.replace('.', '/')}.so", "source": str(path.relative_to(ROOT)),
               "sha256": native._digest(path)} for name, path in native.sources().items()}
    entries[f"{native.GROUP}__mypyc"] = {"binary": f"{native.GROUP}__mypyc.so", "source": None, "sha256": None}
    return {"abi": native._abi(), "modules": entries}


def _run(code: str, **env: str) -> str:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env}, check=True,
                          capture_output=True, text=True).stdout


def test_a_build_is_used_only_if_every_source_is_unchanged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    manifest = _manifest()
    monkeypatch.setattr(native, "BUILD", tmp_path)
    for entry in manifest["modules"].values():  # type: ignore[attr-defined]
        (tmp_path / entry["binary"]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / entry["binary"]).write_bytes(b"")
    binaries, why = native.current(manifest)
    assert why == "current" and binaries is not None and set(binaries) == set(manifest["modules"])  # type: ignore[call-overload]

    edited = dict(manifest["modules"])  # type: ignore[call-overload]
    edited["responses_app.streaming.sse"] = {**edited["responses_app.streaming.sse"], "sha256": "0" * 64}
    assert native.current({**manifest, "modules": edited}) == (
        None, "responses_app/streaming/sse.py changed since the build")

    assert native.current({**manifest, "abi": "cpython-310.so"})[0] is None
    fewer = {k: v for k, v in edited.items() if k != "responses_app.relay.delivery"}
    assert native.current({**manifest, "modules": fewer}) == (None, "built from another list of modules")

    (tmp_path / "responses_app/relay/delivery.so").unlink()
    assert native.current(manifest) == (None, "responses_app/relay/delivery.so is missing")

    garbled = {**manifest["modules"], "responses_app.relay.delivery": {"binary": 5}}  # type: ignore[dict-item]
    assert native.current({**manifest, "modules": garbled})[1].startswith("the manifest does not read")


def test_relay_compiled_false_runs_the_core_interpreted() -> None:
    out = _run("import responses_app.streaming.sse as m, responses_app.native as n; print(m.__file__, n.ACTIVE)",
               RELAY_COMPILED="false")
    path, active = out.split()
    assert path.endswith("sse.py") and active == "False"


@pytest.mark.skipif(not native.ACTIVE and (os.environ.get("CI") != "true" or not native.wanted()),
                    reason="build/native is not built or not current here (`make install` builds it), "
                           "or RELAY_COMPILED=false")
def test_ci_runs_the_suite_on_the_compiled_modules() -> None:
    # CI builds with --strict: every test of this run exercises the compiled group.
    assert native.ACTIVE
    import responses_app.relay.delivery as delivery
    import responses_app.streaming.sse as sse

    assert sse.__file__.endswith(EXTENSION) and delivery.__file__.endswith(EXTENSION)


@pytest.mark.skipif(not native.ACTIVE, reason="build/native is not built or not current here")
def test_compiled_and_interpreted_replay_every_fixture_alike() -> None:
    code = (
        "import json, sys, pathlib; from responses_app.streaming.replay import replay_bytes\n"
        "out = {}\n"
        f"for path in sorted(pathlib.Path({str(FIXTURES)!r}).glob('*.sse')):\n"
        "    for size in (None, 7):\n"
        "        r = replay_bytes(path.read_bytes(), size)\n"
        "        out[f'{path.name}/{size}'] = [r.view, r.response, r.status, r.events, r.patches,\n"
        "                                       [p.kind for p in r.problems]]\n"
        "print(json.dumps(out, sort_keys=True))\n"
    )
    compiled, interpreted = json.loads(_run(code)), json.loads(_run(code, RELAY_COMPILED="false"))
    assert len(compiled) == 2 * len(list(FIXTURES.glob("*.sse"))) > 0
    assert compiled == interpreted

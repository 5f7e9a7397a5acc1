"""axe-core in a page: the accessibility check every browser test can call.

    from tests.browser.axe import assert_accessible
    assert_accessible(page)                   # no serious or critical violation on the page
    assert_accessible(page, ".chat")          # or within one part of it

axe-core comes from npm with a lockfile (tests/browser/js; `npm ci` runs there when it is missing)
and is injected with page.evaluate: no CDN, and the page's Content-Security-Policy does not apply
to it. Skipped without npm, unless CI=true."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from .conftest import IN_CI

JS = Path(__file__).resolve().parent / "js"
AXE = JS / "node_modules" / "axe-core" / "axe.min.js"
SEVERE = ("serious", "critical")


@cache
def axe_source() -> str:
    if not AXE.exists():
        npm = shutil.which("npm")
        if npm is None:
            if IN_CI:
                pytest.fail("CI must have npm for the accessibility checks")
            pytest.skip("npm is not installed")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, capture_output=True, timeout=300)
    return AXE.read_text()


def violations(page: Any, context: str | None = None, impacts: tuple[str, ...] = SEVERE) -> list[dict[str, Any]]:
    """axe's violations of these impacts on the page as it is now (within `context`, a selector)."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source())
    result = page.evaluate("context => axe.run(context || document, {resultTypes: ['violations']})", context)
    return [v for v in result["violations"] if v.get("impact") in impacts]


def describe(found: list[dict[str, Any]]) -> str:
    return "\n".join(f"{v['impact']} {v['id']}: {v['help']} — " + "; ".join(
        str(node.get("target")) for node in v.get("nodes", [])[:5]) for v in found)


def assert_accessible(page: Any, context: str | None = None) -> None:
    found = violations(page, context)
    assert not found, f"axe-core on {page.url}:\n{describe(found)}"

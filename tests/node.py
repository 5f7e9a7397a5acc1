"""Node.js for the tests that run the browser's modules: skipped on a laptop without it, a failure
under CI=true (`.ci/run` installs it)."""

from __future__ import annotations

import os
import shutil

import pytest


def node_or_skip(test: str) -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must have node for the {test} test")
        pytest.skip("node is not installed")
    return node

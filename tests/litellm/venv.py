"""A separate environment with LiteLLM's proxy, pinned: a real third-party Responses API server the
relay is tested against (tests/litellm/test_litellm_proxy.py). Its hundreds of dependencies stay
out of the suite's own environment.

`python -m tests.litellm.venv` creates it (.ci/run does, before the tests); the fixture makes it on
first use too. Its place: $LITELLM_VENV, else `.venv-litellm` beside the project's `.venv`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = "1.108.7"  # the release the relay was first found wedging on (its ids: 441 characters)
REQUIREMENT = f"litellm[proxy]=={VERSION}"


def venv_dir() -> Path:
    if os.environ.get("LITELLM_VENV"):
        return Path(os.environ["LITELLM_VENV"])
    # In a git worktree the shared venv is the main checkout's: keep this one beside it.
    shared = Path(sys.prefix)
    return shared.parent / ".venv-litellm" if shared.name == ".venv" else ROOT / ".venv-litellm"


def python() -> Path:
    return venv_dir() / "bin" / "python"


def executable() -> Path:
    """The proxy's command (`litellm --config ... --port ...`)."""
    return venv_dir() / "bin" / "litellm"


def ready() -> bool:
    if not executable().exists():
        return False
    check = f"import importlib.metadata as m, sys; sys.exit(m.version('litellm') != {VERSION!r})"
    probe = subprocess.run([str(python()), "-c", check], capture_output=True, timeout=60)
    return probe.returncode == 0


def create(timeout_s: float = 900) -> None:
    """Make the environment (raises CalledProcessError or TimeoutExpired when it cannot)."""
    if ready():
        return
    subprocess.run([sys.executable, "-m", "venv", str(venv_dir())], check=True, timeout=timeout_s)
    subprocess.run([str(python()), "-m", "pip", "install", "-q", REQUIREMENT], check=True, timeout=timeout_s)


if __name__ == "__main__":
    create()
    print(executable())

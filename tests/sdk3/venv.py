"""A separate environment with openai-python 3.x (the suite's own stays on 2.x, pinned <3).

`python -m tests.sdk3.venv` creates it (.ci/run does, before the tests); the fixture makes it on
first use too. Its place: $OPENAI3_VENV, else `.venv-openai3` beside the project's `.venv`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENT = "openai[realtime]>=3.8,<4"  # responses.connect is in 3.8 and later


def venv_dir() -> Path:
    if os.environ.get("OPENAI3_VENV"):
        return Path(os.environ["OPENAI3_VENV"])
    # In a git worktree the shared venv is the main checkout's: keep this one beside it.
    shared = Path(sys.prefix)
    return shared.parent / ".venv-openai3" if shared.name == ".venv" else ROOT / ".venv-openai3"


def python() -> Path:
    return venv_dir() / "bin" / "python"


def ready() -> bool:
    if not python().exists():
        return False
    check = "import openai, sys; sys.exit(int(openai.__version__.split('.')[0]) < 3)"
    probe = subprocess.run([str(python()), "-c", check], capture_output=True, timeout=60)
    return probe.returncode == 0


def create(timeout_s: float = 600) -> None:
    """Make the environment (raises CalledProcessError or TimeoutExpired when it cannot)."""
    if ready():
        return
    subprocess.run([sys.executable, "-m", "venv", str(venv_dir())], check=True, timeout=timeout_s)
    subprocess.run([str(python()), "-m", "pip", "install", "-q", REQUIREMENT], check=True, timeout=timeout_s)


if __name__ == "__main__":
    create()
    print(python())

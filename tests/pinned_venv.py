"""A separate virtualenv holding one pinned package the suite's own environment must not have
(openai 3.x beside the suite's 2.x; LiteLLM's proxy and its hundreds of dependencies).

Each lives beside the project's `.venv` (in a git worktree, beside the main checkout's shared one),
or where its environment variable says; `python -m tests.<name>.venv` makes it (.ci/run does, before
the tests), and a fixture makes it on first use too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class PinnedVenv:
    folder: str  # e.g. ".venv-openai3"
    env_var: str  # overrides the place
    requirement: str  # what pip installs
    check: str  # Python run in the venv: exits 0 when the right version is there
    command: str = "python"  # the executable of bin/ that tells it is installed

    def venv_dir(self) -> Path:
        if os.environ.get(self.env_var):
            return Path(os.environ[self.env_var])
        shared = Path(sys.prefix)
        return shared.parent / self.folder if shared.name == ".venv" else ROOT / self.folder

    def python(self) -> Path:
        return self.venv_dir() / "bin" / "python"

    def executable(self) -> Path:
        return self.venv_dir() / "bin" / self.command

    def ready(self) -> bool:
        if not self.executable().exists():
            return False
        probe = subprocess.run([str(self.python()), "-c", self.check], capture_output=True, timeout=60)
        return probe.returncode == 0

    def create(self, timeout_s: float = 900) -> None:
        """Make the environment (raises CalledProcessError or TimeoutExpired when it cannot)."""
        if self.ready():
            return
        subprocess.run([sys.executable, "-m", "venv", str(self.venv_dir())], check=True, timeout=timeout_s)
        subprocess.run([str(self.python()), "-m", "pip", "install", "-q", self.requirement],
                       check=True, timeout=timeout_s)

    def main(self) -> None:
        self.create()
        print(self.executable())

"""A separate environment with openai-python 3.x (the suite's own stays on 2.x, pinned <3):
`python -m tests.sdk3.venv` makes it; $OPENAI3_VENV, else `.venv-openai3` (tests/pinned_venv.py)."""

from __future__ import annotations

from tests.pinned_venv import PinnedVenv

VENV = PinnedVenv(
    folder=".venv-openai3", env_var="OPENAI3_VENV",
    requirement="openai[realtime]>=3.8,<4",  # responses.connect is in 3.8 and later
    check="import openai, sys; sys.exit(int(openai.__version__.split('.')[0]) < 3)",
)
venv_dir, python, ready, create = VENV.venv_dir, VENV.python, VENV.ready, VENV.create

if __name__ == "__main__":
    VENV.main()

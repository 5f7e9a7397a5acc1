"""A separate environment with LiteLLM's proxy, pinned: a real third-party Responses API server the
relay is tested against (tests/litellm/test_litellm_proxy.py), its hundreds of dependencies kept out
of the suite's own environment. `python -m tests.litellm.venv` makes it; $LITELLM_VENV, else
`.venv-litellm` (tests/pinned_venv.py)."""

from __future__ import annotations

from tests.pinned_venv import PinnedVenv

VERSION = "1.108.7"  # the release the relay was first found wedging on (its ids: 441 characters)
VENV = PinnedVenv(
    folder=".venv-litellm", env_var="LITELLM_VENV", requirement=f"litellm[proxy]=={VERSION}",
    check=f"import importlib.metadata as m, sys; sys.exit(m.version('litellm') != {VERSION!r})",
    command="litellm",  # `litellm --config ... --port ...`
)
venv_dir, python, executable, ready, create = VENV.venv_dir, VENV.python, VENV.executable, VENV.ready, VENV.create

if __name__ == "__main__":
    VENV.main()

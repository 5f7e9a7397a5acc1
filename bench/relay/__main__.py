"""`python -m bench.relay`: the relay benchmark's entry point, and the one its roles are started with."""

from __future__ import annotations

import sys

from bench.relay.cli import main

if __name__ == "__main__":
    sys.exit(main())

"""`python -m bench [--quick]`: run bench/core.py and print its table."""

from __future__ import annotations

import sys

from bench.core import main

if __name__ == "__main__":
    sys.exit(main())

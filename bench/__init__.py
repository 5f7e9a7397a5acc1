"""Benchmarks: `make bench` (python -m bench). See bench/core.py."""

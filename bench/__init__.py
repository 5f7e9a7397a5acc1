"""The benchmarks: `python -m bench` lists them, `python -m bench <name>` runs one (bench/README.md)."""

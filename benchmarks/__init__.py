"""The measurements a user reruns, each run from the repository root as
``python -m benchmarks.NAME`` (index: benchmarks/README.md)."""

"""The GPU experiments and their job scheduler (``lanes``), run on the GPU host from a copy of the
repository as ``python3 -m benchmarks.gpu.NAME`` (benchmarks/gpu/README.md)."""

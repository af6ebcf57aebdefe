"""One-off experiments whose results are committed (benchmarks/results/) and whose conclusions the
library already follows; they still run (``python -m benchmarks.history.NAME``) but are not kept
up to date."""

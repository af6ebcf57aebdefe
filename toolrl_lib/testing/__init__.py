"""Fixtures for tests, benchmarks and the notebooks' demo mode; not part of the library's API.

``lora_run.make_lora_run`` builds a run directory with a random adapter (notebook 04 without a
training run, merge and evaluation tests); ``nbbuild`` writes notebooks from cell sources and
owns the set-up cell every notebook starts with. The tiny random model is
``toolrl_lib.models.make_tiny_model``, re-exported here.
"""

from toolrl_lib.models import make_tiny_model
from toolrl_lib.testing.lora_run import make_lora_run

__all__ = ["make_lora_run", "make_tiny_model"]

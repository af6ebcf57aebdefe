"""Merge a LoRA adapter into its base model, export a standalone folder, and prove it worked.

Every merge is verified before its output folder exists (the checks, in order, are listed in
``toolrl_lib.merge.core``).

Modules: ``core`` (the merge and its checks in order), ``checks`` (the measurements),
``inputs`` (adapter, base and prompts from a run directory), ``publish`` (staging, provenance,
hub upload), ``report`` (options, report, errors), ``display`` and ``plots`` (notebook 04),
``demo`` (a run with a random adapter, for notebook 04 before notebook 03 has trained one).
This package namespace is the merge API the CLI, notebook 04 and the tests use.
"""

from toolrl_lib.merge.checks import (
    DTYPES,
    FIXED_PROMPTS,
    LOGIT_TOLERANCE,
    compare_generations,
    logit_limits,
    stored_dtypes,
)
from toolrl_lib.merge.core import choose_backend, merge_adapter, merge_run, save_merged
from toolrl_lib.merge.demo import make_demo_run
from toolrl_lib.merge.display import side_by_side, summary_rows
from toolrl_lib.merge.inputs import (
    adapter_base_name,
    check_adapter_folder,
    checkpoint_dtype,
    default_output,
    resolve_checkpoint,
    run_settings,
)
from toolrl_lib.merge.publish import is_complete_merge, push_to_hub, sha256_of
from toolrl_lib.merge.report import (
    BACKENDS,
    MERGE_INFO,
    MergeError,
    MergeOptions,
    MergeReport,
    MergeVerificationError,
)
from toolrl_lib.run_dir import ADAPTER_CONFIG, RUN_INFO, read_run_info, resolve_base

__all__ = [
    "ADAPTER_CONFIG", "BACKENDS", "DTYPES", "FIXED_PROMPTS", "LOGIT_TOLERANCE", "MERGE_INFO",
    "RUN_INFO", "MergeError", "MergeOptions", "MergeReport", "MergeVerificationError",
    "adapter_base_name", "check_adapter_folder", "checkpoint_dtype", "choose_backend", "compare_generations",
    "default_output",
    "is_complete_merge", "logit_limits", "make_demo_run", "merge_adapter", "merge_run", "push_to_hub",
    "read_run_info", "resolve_base", "resolve_checkpoint", "run_settings", "save_merged",
    "sha256_of", "side_by_side", "stored_dtypes", "summary_rows",
]

"""Merge a LoRA adapter into its base model, export a standalone folder, and prove it worked.

Merging is where training silently disappears: an adapter that never left its zero
initialisation, a delta too small for bf16 to represent, a base that is not the one the
adapter was trained on, or a save that drops tensors. So every merge is verified before
the output folder exists at all:

1. the adapter loads completely into the base and its delta ``B @ A * scale`` is non-zero;
2. the merge itself is exact: the merged fp32 model gives the same logits as base+adapter;
3. the delta survives rounding to the output dtype (reported; vanishing entirely is an error);
4. the saved folder reloads with plain ``AutoModelForCausalLM`` (offline) in that dtype,
   holds the merged values at probed weight positions, and its logits stay within the
   dtype's tolerance (``LOGIT_TOLERANCE``) of base+adapter;
5. greedy generations of the reloaded model match base+adapter (differences are listed).

The folder is written to a hidden sibling (``.<name>.partial-*``) and renamed into place
only after every check passed, with ``toolrl_merge.json`` (provenance + verification)
written last: a failed check or an interruption leaves nothing that looks complete.

Modules: ``core`` (the merge and its checks in order), ``checks`` (the measurements),
``inputs`` (adapter, base and prompts from a run directory), ``publish`` (staging, provenance,
hub upload), ``report`` (options, report, errors), ``display`` and ``plots`` (notebook 04).
This package namespace is the merge API the CLI, notebook 04 and the tests use.
"""

from toolrl_lib.merge.checks import (
    DTYPES,
    FIXED_PROMPTS,
    LOGIT_TOLERANCE,
    compare_generations,
    logit_limits,
)
from toolrl_lib.merge.core import choose_backend, merge_adapter, merge_run, save_merged
from toolrl_lib.merge.display import side_by_side, summary_rows
from toolrl_lib.merge.inputs import (
    adapter_base_name,
    check_adapter_folder,
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
    "adapter_base_name", "check_adapter_folder", "choose_backend", "compare_generations",
    "default_output",
    "is_complete_merge", "logit_limits", "merge_adapter", "merge_run", "push_to_hub",
    "read_run_info", "resolve_base", "resolve_checkpoint", "run_settings", "save_merged",
    "sha256_of", "side_by_side", "summary_rows",
]

"""Every place this project touches TRL's or transformers' private internals, in one module.

TRL has no public hooks for what we need (wrapping the rollout call, RLSD's extra forward
passes, its metrics dict, a resume on several CPU processes). Each such touch point is listed
in ``PRIVATE_API`` with the parameters we rely on, and ``check_trl`` compares that list with
the installed TRL, so a TRL upgrade that renames or reshapes one of them fails loudly here
(``tests/test_trl_compat.py``, and at trainer construction) instead of silently training
something else. Wrapping a trainer's method goes through one composable hook, ``hook``:
wrappers stack (the last one installed runs outermost), each receiving the call it wraps.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# GRPOTrainer method -> the parameters we pass (or override with), in order.
PRIVATE_API: dict[str, tuple[str, ...]] = {
    # the call around model.generate: merged rollouts, per-rank timing, the throughput benchmark
    "_generate_single_turn": ("prompt_ids", "images", "multimodal_fields", "num_generations"),
    # RLSD-TR: overridden to re-weight advantages after TRL scored the group
    "_generate_and_score_completions": ("inputs",),
    # RLSD-TR: teacher and student per-token log-probs of the sampled completions
    "_get_per_token_logps_and_entropies": ("model", "input_ids", "attention_mask",
                                           "logits_to_keep", "batch_size"),
    # RLSD-TR: the privileged (teacher) prompts tokenised as TRL tokenises prompts
    "_tokenize_prompts": ("prompts",),
    # RLSD-TR: the teacher's EMA state saved and restored with each checkpoint
    "_save_checkpoint": ("model", "trial"),
    "_load_from_checkpoint": ("resume_from_checkpoint", "model"),
    # fast.group_batches: the round's shuffle (module-level shuffle_sequence_dict) swapped inside it
    "_prepare_inputs": ("generation_batch",),
    # fast.overlap_generation: transformers' draw of each step's batches, read one round ahead
    "get_batch_samples": ("epoch_iterator", "num_batches", "device"),
    # transformers: the optimizer load that --resume on several CPU processes needs to redirect
    "_load_optimizer_and_scheduler": ("checkpoint",),
}
ROLLOUT_METHODS = ("_generate_single_turn", "_generate")
# trl.generation.vllm_generation.VLLMGeneration (the trainer's ``vllm_generation``) -> parameters:
# fast.generation_process replaces ``sync_weights`` and reads the weights through ``_iter_named_params``;
# weight_sync.py replaces ``_iter_named_params`` and names the weights through ``_fix_param_name_to_vllm``
GENERATION_API: dict[str, tuple[str, ...]] = {"_iter_named_params": (), "sync_weights": (),
                                              "_fix_param_name_to_vllm": ("name", "extra_prefixes")}


def check_trl(trainer_class: Any = None, generation_class: Any = None) -> list[str]:
    """What in ``PRIVATE_API`` (and ``GENERATION_API``) the installed GRPOTrainer (and
    VLLMGeneration) lacks or names differently (empty: all there). Parameters must appear in this
    order, other ones may sit between or after them."""
    if trainer_class is None:
        from trl import GRPOTrainer as trainer_class
    if generation_class is None:
        from trl.generation.vllm_generation import VLLMGeneration as generation_class
    problems = []
    for owner, api, label in ((trainer_class, PRIVATE_API, "GRPOTrainer"),
                              (generation_class, GENERATION_API, "VLLMGeneration")):
        for name, expected in api.items():
            method = getattr(owner, name, None)
            if method is None:
                problems.append(f"{label}.{name} is missing")
                continue
            params = [p for p in inspect.signature(method).parameters if p != "self"]
            positions = [params.index(p) if p in params else -1 for p in expected]
            if -1 in positions or positions != sorted(positions):
                problems.append(f"{label}.{name}{tuple(params)} no longer takes {expected} in order")
    return problems


def require_trl(trainer_class: Any = None) -> None:
    """``check_trl`` as an error naming the installed TRL version and this module."""
    problems = check_trl(trainer_class)
    if problems:
        import trl

        raise RuntimeError(f"TRL {trl.__version__} differs from what toolrl_lib was tested with: "
                           + "; ".join(problems) + " (update toolrl_lib/fast/trl_compat.py)")


def hook(trainer: Any, name: str, wrapper: Callable[..., Any]) -> str:
    """Wrap ``trainer.<name>`` on this instance: ``wrapper(call, *args, **kwargs)`` gets the
    method as installed so far (TRL's, or an earlier hook) and decides how to call it."""
    inner = getattr(trainer, name, None)
    if inner is None or not callable(inner):
        raise RuntimeError(f"{type(trainer).__name__} has no {name}: update toolrl_lib/fast/trl_compat.py")

    @functools.wraps(inner)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        return wrapper(inner, *args, **kwargs)

    setattr(trainer, name, hooked)
    return name


def generation_method(trainer: Any) -> tuple[str, Any]:
    """(name, bound method) of TRL's call around ``model.generate`` on this trainer. TRL 1.x
    names it ``_generate_single_turn`` and returns ``(completion_ids, logprobs)`` for this rank
    alone; older releases only had ``_generate`` (``(prompt_ids, completion_ids, ...)``), which
    in 1.x also gathers lengths from every rank, so timing around it waits for the slowest."""
    for name in ROLLOUT_METHODS:
        method = getattr(trainer, name, None)
        if method is not None:
            return name, method
    raise RuntimeError(f"this TRL's GRPOTrainer has none of {ROLLOUT_METHODS}: TRL renamed its "
                       "rollout method; update toolrl_lib/fast/trl_compat.py")


def hook_rollout(trainer: Any, wrapper: Callable[..., Any]) -> str:
    """``hook`` on TRL's rollout method (``generation_method``); returns the method's name."""
    name, _ = generation_method(trainer)
    return hook(trainer, name, wrapper)


def completion_ids_of(method_name: str, result: Any) -> list[list[int]]:
    """The per-completion token-id lists in what the rollout method ``method_name`` returned."""
    return result[0] if method_name == "_generate_single_turn" else result[1]


def tokenize_prompts(trainer: Any, prompts: list[Any]) -> list[list[int]]:
    """Prompts tokenised as TRL tokenises them for generation (chat template applied)."""
    prompt_ids, _, _ = trainer._tokenize_prompts(prompts)
    return [list(map(int, ids)) for ids in prompt_ids]


def per_token_logps(trainer: Any, model: Any, input_ids: Any, attention_mask: Any,
                    logits_to_keep: int, batch_size: int) -> Any:
    """TRL's per-token log-probs of the last ``logits_to_keep`` tokens (None if a patched
    trainer returns something else)."""
    logps, _, _ = trainer._get_per_token_logps_and_entropies(
        model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size)
    return logps


def log_metric(trainer: Any, mode: str, key: str, value: float) -> None:
    """Append to TRL's per-mode metrics, which it averages and logs at each logging step."""
    trainer._metrics[mode][key].append(value)


def chunked_logprob_kernel() -> Any:
    """TRL's chunked log-prob autograd function (None where TRL ships none, e.g. no Triton)."""
    import trl.trainer.utils as trl_utils

    return getattr(trl_utils, "_ChunkedLogProbFunction", None)


def set_chunked_logprob_kernel(function: Any) -> None:
    """Replace TRL's module-level chunked log-prob function (the CPU fallback)."""
    import trl.trainer.utils as trl_utils

    trl_utils._ChunkedLogProbFunction = function


@contextmanager
def torch_load_on_plain_cpu() -> Iterator[None]:
    """While active, ``torch.load(map_location="cpu:N")`` reads ``"cpu"``: transformers passes
    ``args.device`` (``cpu:0`` under several CPU processes) as the location, which torch cannot
    restore to. The swap is process-wide, so keep the block to the optimizer load alone."""
    import torch

    original = torch.load

    def load(*args: Any, **kwargs: Any) -> Any:
        if str(kwargs.get("map_location", "")).startswith("cpu:"):
            kwargs["map_location"] = "cpu"
        return original(*args, **kwargs)

    torch.load = load
    try:
        yield
    finally:
        torch.load = original

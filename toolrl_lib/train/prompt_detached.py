"""Format priming with each prompt run forward only: no backward through the prompt.

A priming row is ~460 prompt tokens (the tool schemas) and ~60 completion tokens. SFT scores the
completion only, yet its backward still runs through every prompt position, because the
completion attends to the prompt's keys/values: on a CPU that backward is most of priming's time.
``detached_prompt_loss`` runs each row's prompt (all but its last token) under ``no_grad`` into a
key/value cache, then the rest with gradients on top of that cache. The loss is the same number
as TRL's (tested); the gradient leaves out the paths that run back through the prompt's
keys/values, a truncated backward (the LoRA weights still learn from every completion position,
keys and values included). Compute per row: the prompt once forward, instead of forward and
backward (~3x). What it does to the primed model was measured, not assumed:
``benchmarks/priming_detached.py`` (results in ``benchmarks/results/priming_detached.md``).

Measured on the smoke priming (128 rows, 32 steps): 900 -> 522 CPU-s, but the primed model
scored lower on the validation prompts (binary mean@4 0.131 -> 0.037, paired 95% CI
[-0.175, -0.019]): the prompt's share of the gradient matters for this 135M model. So it is off
everywhere (``priming.prompt_gradient: true``, TRL's loss); the option stays for larger models
and longer prompts, where it is worth measuring again with that script.
"""

from __future__ import annotations

from typing import Any


def detached_prompt_loss(
    model: Any, input_ids: Any, attention_mask: Any | None, labels: Any,
    num_items_in_batch: Any | None = None,
) -> Any | None:
    """Completion-only SFT loss (summed token NLL over ``num_items_in_batch``, as TRL's SFT
    computes it) with each row's prompt detached; None when no row has a scored token.

    Rows are right-padded (``attention_mask`` 0 at the end) or unpadded; ``labels`` are TRL's
    unshifted labels, -100 where not scored. The prompt is everything before the first scored
    token; its last token is re-run with gradients, since it predicts the first scored one."""
    import torch
    from transformers import DynamicCache

    total, scored_tokens = None, 0
    for row in range(input_ids.shape[0]):
        keep = attention_mask[row].bool() if attention_mask is not None else slice(None)
        ids, lab = input_ids[row][keep][None], labels[row][keep][None]
        scored = (lab[0] != -100).nonzero()
        if len(scored) == 0:
            continue
        split = max(int(scored[0]) - 1, 0)
        cache = DynamicCache()
        if split:
            with torch.no_grad():
                model(input_ids=ids[:, :split], past_key_values=cache, use_cache=True, logits_to_keep=1)
        positions = torch.arange(split, ids.shape[1], device=ids.device)[None]
        out = model(input_ids=ids[:, split:], position_ids=positions, past_key_values=cache,
                    use_cache=True, labels=lab[:, split:], fused_lm_head=True)
        nll = -out.log_probs.sum()  # zero on ignored positions
        total = nll if total is None else total + nll
        scored_tokens += int(out.label_mask.sum())
    if total is None:
        return None
    denominator = scored_tokens if num_items_in_batch is None else num_items_in_batch
    return total / torch.as_tensor(denominator, device=total.device).clamp(min=1)


def detached_prompt_trainer_class() -> type:
    """TRL's ``SFTTrainer`` with ``compute_loss`` replaced by ``detached_prompt_loss``.

    Only the loss changes; what it does not handle (evaluation outputs, inputs without labels,
    a batch with nothing scored) goes to TRL's own. The per-token entropy/accuracy metrics of
    TRL's SFT log are not computed on this path (its ``loss`` is)."""
    from trl import SFTTrainer

    class DetachedPromptSFTTrainer(SFTTrainer):
        def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                         num_items_in_batch: Any | None = None) -> Any:
            if return_outputs or "labels" not in inputs or "input_ids" not in inputs:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            loss = detached_prompt_loss(model, inputs["input_ids"], inputs.get("attention_mask"),
                                        inputs["labels"], num_items_in_batch)
            if loss is None:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:
                loss = loss * self.accelerator.num_processes  # as TRL's: DDP averages the gradients
            return loss

    return DetachedPromptSFTTrainer

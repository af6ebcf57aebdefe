"""``RLSDGRPOTrainer``: TRL's GRPOTrainer plus RLSD token weights (formulas: the package docstring).

One extension point is used: ``_generate_and_score_completions`` (with every other TRL
internal this trainer overrides or calls, it is listed and checked in ``trl_compat``). After TRL has generated,
scored and computed the sequence advantages A (shape (B,)), this subclass runs one
no-grad teacher forward pass on (prompt + privileged text + completion), computes
Δ_t and w_t, and hands TRL token advantages Â_t of shape (B, T). TRL's ``_compute_loss``
accepts (B, T) advantages as they are, so every TRL loss type, clipping rule, KL term and
aggregation keeps working unchanged. The trust-region teacher is moved toward the policy
by a callback after each optimizer step, and saved next to each checkpoint.

Cost: one no-grad forward pass of the teacher per generation batch, plus one of the student
when TRL has not already computed old log-probs (it has whenever a generation batch spans
several optimizer steps). Measured on an H200 (benchmarks/results/rlsd_overhead.md): a few
percent of a step, no extra peak memory beyond the teacher adapter.
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing

from toolrl_lib.fast import trl_compat
from toolrl_lib.fast.cpu_logprob import install_cpu_logprob_fallback
from toolrl_lib.train.rlsd.config import RLSDConfig, effective_lambda
from toolrl_lib.train.rlsd.context import PrivilegedPrompter
from toolrl_lib.train.rlsd.teacher import make_teacher
from toolrl_lib.train.rlsd.weights import (
    finish_stats,
    reweight_advantages,
    token_deltas,
    token_weights,
    weight_stats,
)

PRIVILEGED_COLUMN = "privileged"
TEACHER_STATE_FILE = "rlsd_teacher.safetensors"


class _TeacherUpdate(TrainerCallback):
    """Moves the trust-region teacher toward the policy after every optimizer step."""

    def __init__(self, teacher: Any) -> None:
        self.teacher = teacher

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.teacher.update()


def _left_pad(rows: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (ids, mask), left padded (prompts end where completions start)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.as_tensor(row, dtype=torch.long)
            mask[i, width - len(row) :] = 1
    return ids.to(device), mask.to(device)


class RLSDGRPOTrainer(GRPOTrainer):
    """GRPO whose per-token advantage magnitudes come from a privileged self-teacher.

    Same arguments as ``trl.GRPOTrainer`` plus ``rlsd``. The training dataset needs a
    ``privileged`` column (text the teacher sees after the user's request). ``args.loss_type``
    may be ``"rlsd"``; it is then replaced by ``rlsd.base_loss_type``.
    """

    def __init__(self, *args: Any, rlsd: RLSDConfig | None = None, **kwargs: Any) -> None:
        self.rlsd = rlsd if rlsd is not None else RLSDConfig()
        trl_compat.require_trl(GRPOTrainer)  # the internals overridden and called below
        grpo_args = kwargs.get("args") if "args" in kwargs else (args[2] if len(args) > 2 else None)
        if grpo_args is not None and getattr(grpo_args, "loss_type", None) == "rlsd":
            grpo_args.loss_type = self.rlsd.base_loss_type
        _check_privileged_column(kwargs.get("train_dataset", args[3] if len(args) > 3 else None))
        install_cpu_logprob_fallback()  # no-op where TRL's Triton kernel exists
        super().__init__(*args, **kwargs)
        unwrapped = self.accelerator.unwrap_model(self.model)
        # Building the teacher (a new LoRA adapter draws its init) must not shift the random
        # stream: with the same seed, GRPO and RLSD runs then sample the same first batches.
        devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=devices):
            self.rlsd_teacher = make_teacher(self.rlsd.teacher, unwrapped, self.rlsd.teacher_update_rate)
        self._prompter = PrivilegedPrompter(self._tokenizer, getattr(self, "chat_template_kwargs", None))
        self.add_callback(_TeacherUpdate(self.rlsd_teacher))

    # -- the one extension point ---------------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        lam = effective_lambda(self.rlsd.lam, self.rlsd.decay_steps, self.state.global_step)
        mask = output["completion_mask"]
        if "tool_mask" in output:
            mask = mask * output["tool_mask"]

        teacher_logps = self._teacher_logps(inputs, output)
        student_logps = output.get("old_per_token_logps")
        if student_logps is None:
            student_logps = self._student_logps(output)
        delta = token_deltas(teacher_logps, student_logps) * mask
        advantages = output["advantages"]
        weights = token_weights(delta, advantages, self.rlsd.eps_w)
        output["advantages"] = reweight_advantages(advantages, weights, lam)
        self._log_rlsd(delta, advantages, mask, lam, mode)
        return output

    # -- forward passes --------------------------------------------------------------------
    def teacher_prompts(self, inputs: list[dict[str, Any]]) -> list[Any]:
        """Each row's prompt with its privileged text inserted (what only the teacher reads)."""
        prompts = []
        for i, row in enumerate(inputs):
            if PRIVILEGED_COLUMN not in row or not isinstance(row[PRIVILEGED_COLUMN], str):
                raise ValueError(
                    f"RLSD: batch row {i} has no string '{PRIVILEGED_COLUMN}' column "
                    f"(found columns {sorted(row)}); the training dataset must carry the "
                    "ground-truth calls rendered by the family adapter's render_completion"
                )
            hint = self.rlsd.render_privileged(row[PRIVILEGED_COLUMN])
            prompts.append(self._prompter(row["prompt"], hint))
        return prompts

    def _forward_batch_size(self) -> int:
        if self.rlsd.teacher_batch_size:
            return self.rlsd.teacher_batch_size
        training = self.model.training
        return self.args.per_device_train_batch_size if training else self.args.per_device_eval_batch_size

    def _completion_logps(self, model: Any, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                          output: dict[str, Any]) -> torch.Tensor:
        completion_ids = output["completion_ids"]
        ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention = torch.cat([prompt_mask, output["completion_mask"]], dim=1)
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            logps = trl_compat.per_token_logps(self, model, ids, attention, completion_ids.size(1),
                                               self._forward_batch_size())
        if logps is None or tuple(logps.shape) != tuple(completion_ids.shape):
            raise RuntimeError(
                f"RLSD expected per-token log-probs of shape {tuple(completion_ids.shape)} from "
                f"GRPOTrainer._get_per_token_logps_and_entropies, got "
                f"{None if logps is None else tuple(logps.shape)}; a patched trainer (e.g. Unsloth "
                "returning hidden states) is not supported: use backend 'peft' for loss_type 'rlsd'"
            )
        return logps

    def _teacher_logps(self, inputs: list[dict[str, Any]], output: dict[str, Any]) -> torch.Tensor:
        prompt_ids_list = trl_compat.tokenize_prompts(self, self.teacher_prompts(inputs))
        device = output["completion_ids"].device
        prompt_ids, prompt_mask = _left_pad(prompt_ids_list, self._tokenizer.pad_token_id, device)
        with self.rlsd_teacher.active(self.model) as teacher_model:
            return self._completion_logps(teacher_model, prompt_ids, prompt_mask, output)

    def _student_logps(self, output: dict[str, Any]) -> torch.Tensor:
        return self._completion_logps(self.model, output["prompt_ids"], output["prompt_mask"], output)

    # -- logging and checkpoints -------------------------------------------------------------
    def _log_rlsd(self, delta: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                  lam: float, mode: str) -> None:
        stats = weight_stats(delta, advantages, mask, self.rlsd.eps_w)
        sums = ("weight_sum", "clipped_sum", "active_count", "delta_sum", "kl_sum", "token_count")
        packed = self.accelerator.gather(torch.stack([stats[k].float() for k in sums]).unsqueeze(0))
        reduced = dict(zip(sums, packed.sum(dim=0), strict=True))
        reduced["weight_min"] = self.accelerator.gather(stats["weight_min"].float().reshape(1)).min()
        reduced["weight_max"] = self.accelerator.gather(stats["weight_max"].float().reshape(1)).max()
        for name, value in finish_stats(reduced).items():
            if not math.isnan(value):  # no A != 0 tokens (all groups tied): nothing to report
                trl_compat.log_metric(self, mode, f"rlsd/{name}", value)
        trl_compat.log_metric(self, mode, "rlsd/lambda", lam)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        state = self.rlsd_teacher.state_dict()
        if state and self.args.should_save:
            from safetensors.torch import save_file

            folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
            save_file(state, os.path.join(folder, TEACHER_STATE_FILE))

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        path = os.path.join(resume_from_checkpoint, TEACHER_STATE_FILE)
        if os.path.isfile(path):
            from safetensors.torch import load_file

            self.rlsd_teacher.load_state_dict(load_file(path))


def _check_privileged_column(dataset: Any) -> None:
    """Fail at construction, not at step 1, when the dataset lacks the privileged text."""
    columns = getattr(dataset, "column_names", None)
    if isinstance(columns, list) and PRIVILEGED_COLUMN not in columns:
        raise ValueError(
            f"RLSD needs a '{PRIVILEGED_COLUMN}' column in the training dataset (the ground-truth "
            f"calls rendered by the family adapter's render_completion); found columns {columns}"
        )

"""One GRPO step taken apart: every number between "sample G completions" and "the loss".

``dissect`` samples a real batch (a few prompts x G completions), scores it, and computes by
hand, with plain tensor operations, what TRL's ``GRPOTrainer`` computes inside one step:

1. rewards per completion and component, group mean/std and the advantages under each
   ``scale_rewards`` option TRL supports (``group``, ``batch``, ``none``);
2. the per-token log-probabilities of the sampling ("old") policy, of the reference (the
   adapter switched off) and of the policy after one optimizer step on this batch;
3. the importance ratios, where the clip range (``epsilon``, ``epsilon_high``) bites, the
   per-token surrogate and KL term;
4. the loss as ``grpo``, ``dapo``, ``dr_grpo`` and ``gspo`` aggregate it, with and without
   the KL term, and how much each token's log-probability moves each loss (autograd).

Why one optimizer step: with TRL's default ``num_iterations=1`` the policy computing the loss
*is* the sampler: every ratio is 1 and clipping never bites. ``update_lr > 0`` reproduces the
second pass over a batch (``num_iterations > 1``). ``compare_with_trl`` drives TRL's own loss
on the same tensors and model state (the tests require agreement within 1e-5, fp32).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

LOSS_TYPES = ("grpo", "dapo", "dr_grpo", "gspo")
SCALE_REWARDS = ("group", "batch", "none")
STD_EPS = 1e-4  # TRL adds this to the std before dividing
# our loss name -> (TRL loss_type, importance_sampling_level); as in trainer.grpo_loss_kwargs
TRL_LOSS = {"grpo": ("grpo", "token"), "dapo": ("dapo", "token"),
            "dr_grpo": ("dr_grpo", "token"), "gspo": ("grpo", "sequence")}

Scorer = Callable[[list[dict[str, Any]], list[str]], list[dict[str, float]]]


@dataclass
class StepSettings:
    """What one dissected step samples and how its loss is configured (GRPOConfig names)."""

    num_generations: int = 4  # G, completions per prompt
    max_completion_length: int = 32
    temperature: float = 1.0
    top_p: float = 1.0
    epsilon: float = 0.2
    epsilon_high: float | None = None  # None = epsilon
    beta: float = 0.04  # KL weight of the "with KL" rows (the "without" rows use 0)
    scale_rewards: str = "group"  # the advantages the losses use
    update_loss: str = "dapo"  # the loss of the one optimizer step between sampling and the loss
    update_lr: float = 2e-3  # AdamW step size of that step; 0 = no step (every ratio is 1)
    bias_correction_kl: bool = True  # TRL 1.15's default (use_bias_correction_kl)
    seed: int = 0

    def __post_init__(self) -> None:
        for name, ok, rule in (("num_generations", self.num_generations >= 2, "must be >= 2"),
                               ("scale_rewards", self.scale_rewards in SCALE_REWARDS, f"use one of {SCALE_REWARDS}"),
                               ("update_loss", self.update_loss in LOSS_TYPES, f"use one of {LOSS_TYPES}")):
            if not ok:
                raise ValueError(f"{name} = {getattr(self, name)!r}: {rule}")

    @property
    def eps_high(self) -> float:
        return self.epsilon if self.epsilon_high is None else self.epsilon_high


@dataclass
class Batch:
    """One generation batch, laid out as TRL lays it out: prompt-major, G rows per prompt."""

    prompt_ids: torch.Tensor  # (B, P), left padded
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor  # (B, T), right padded
    completion_mask: torch.Tensor  # 1 up to and including the first end-of-turn token
    texts: list[str]
    group_size: int


@dataclass
class Step:
    """Everything ``dissect`` computed; the tables are what the notebook shows."""

    settings: StepSettings
    batch: Batch
    rewards: pd.DataFrame  # one row per completion: components, total, length
    advantages: pd.DataFrame  # one row per completion: group stats, A under each scale option
    old_logps: torch.Tensor  # (B, T), zero on padding
    ref_logps: torch.Tensor
    logps: torch.Tensor  # the policy after the update step
    tokens: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per completion token
    losses: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per (loss, beta)

    @property
    def adv(self) -> torch.Tensor:
        """The advantages the losses use (``settings.scale_rewards``), one per completion."""
        column = self.advantages[f"adv_{self.settings.scale_rewards}"].to_numpy()
        return torch.tensor(column, dtype=torch.float32, device=self.batch.completion_ids.device)


# -- 1. sample and score ------------------------------------------------------------------------
def sample_batch(model: Any, tokenizer: Any, prompts: list[str], s: StepSettings) -> Batch:
    """G sampled completions per prompt; the mask stops after the first end-of-turn token."""
    from toolrl_lib.generation import stop_token_ids

    device = next(model.parameters()).device
    tokenizer.padding_side = "left"
    enc = tokenizer(prompts, padding=True, add_special_tokens=False, return_tensors="pt").to(device)
    stops = stop_token_ids(tokenizer)
    with torch.random.fork_rng(devices=range(torch.cuda.device_count())), torch.no_grad():
        torch.manual_seed(s.seed)
        out = model.generate(**enc, do_sample=True, temperature=s.temperature, top_p=s.top_p,
                             max_new_tokens=s.max_completion_length, num_return_sequences=s.num_generations,
                             eos_token_id=stops, pad_token_id=tokenizer.pad_token_id)
    completion = out[:, enc["input_ids"].size(1):]
    is_stop = torch.isin(completion, torch.tensor(stops, device=device))
    first = torch.where(is_stop.any(1), is_stop.int().argmax(1), completion.size(1))
    mask = (torch.arange(completion.size(1), device=device)[None] <= first[:, None]).long()
    width = int(mask.sum(1).max())
    completion, mask = completion[:, :width], mask[:, :width]
    completion = completion.masked_fill(mask == 0, tokenizer.pad_token_id)
    texts = [tokenizer.decode(ids[m.bool()], skip_special_tokens=True) for ids, m in zip(completion, mask, strict=True)]
    rep = lambda t: t.repeat_interleave(s.num_generations, dim=0)  # noqa: E731
    return Batch(rep(enc["input_ids"]), rep(enc["attention_mask"]), completion, mask, texts,
                 s.num_generations)


def reward_scorer(scheme: str = "weighted", family: str = "hermes",
                  weights: dict[str, float] | None = None) -> Scorer:
    """The training reward, component by component (rows carry ground_truth/tools JSON)."""
    from toolrl_lib.rewards import COMPONENTS, score

    def scorer(rows: list[dict[str, Any]], texts: list[str]) -> list[dict[str, float]]:
        out = []
        for row, text in zip(rows, texts, strict=True):
            r = score(text, json.loads(row["ground_truth"]), json.loads(row["tools"]), scheme,
                      family, weights, context=row["prompt"])
            out.append({**{c: getattr(r, c) for c in COMPONENTS}, "total": r.total})
        return out

    return scorer


def reward_table(rows: list[dict[str, Any]], batch: Batch, scorer: Scorer) -> pd.DataFrame:
    """One row per completion: its group, text, token length and reward components."""
    per_completion = [row for row in rows for _ in range(batch.group_size)]
    n, G = len(batch.texts), batch.group_size
    table = pd.DataFrame({"group": [i // G for i in range(n)], "sample": [i % G for i in range(n)],
                          "length": batch.completion_mask.sum(1).tolist()})
    return pd.concat([table, pd.DataFrame(scorer(per_completion, batch.texts))], axis=1).assign(
        completion=batch.texts)


def advantage_table(rewards: pd.DataFrame) -> pd.DataFrame:
    """Group mean/std and A under each scale_rewards option, as TRL 1.15 defines them:
    ``group``: (r - group mean) / (group std + 1e-4); ``batch``: divided by the std of the
    whole batch instead; ``none`` (Dr. GRPO): r - group mean. Stds are sample stds (n - 1)."""
    table = rewards[["group", "sample", "total"]].rename(columns={"total": "reward"}).copy()
    by_group = table.groupby("group")["reward"]
    table["group_mean"] = by_group.transform("mean")
    table["group_std"] = by_group.transform(lambda r: r.std(ddof=1))
    table["batch_std"] = table["reward"].std(ddof=1)
    centred = table["reward"] - table["group_mean"]
    table["adv_group"] = centred / (table["group_std"] + STD_EPS)
    table["adv_batch"] = centred / (table["batch_std"] + STD_EPS)
    table["adv_none"] = centred
    table["zero_variance"] = table["group_std"].abs() < 1e-9
    return table


# -- 2. log-probabilities -----------------------------------------------------------------------
def completion_logps(model: Any, batch: Batch, temperature: float) -> torch.Tensor:
    """log pi(token | prefix) of every completion token at the sampling temperature, zero on
    padding: logits of the positions before each token, divided by T, log-softmax, gather."""
    ids = torch.cat([batch.prompt_ids, batch.completion_ids], 1)
    attention = torch.cat([batch.prompt_mask, batch.completion_mask], 1)
    T = batch.completion_ids.size(1)
    logits = model(input_ids=ids, attention_mask=attention, logits_to_keep=T + 1).logits[:, :-1]
    logps = torch.log_softmax(logits.float() / temperature, -1)
    picked = logps.gather(-1, batch.completion_ids.unsqueeze(-1)).squeeze(-1)
    return picked * batch.completion_mask


def reference_logps(model: Any, batch: Batch, temperature: float, old: torch.Tensor) -> torch.Tensor:
    """The reference policy: the model GRPO started from, i.e. the adapter switched off (TRL
    keeps a frozen copy of the initial adapter; ours start at zero). With the adapter still
    at zero (B = 0 everywhere) that is exactly the sampler: ``old`` is reused, no forward."""
    if all(not p.any() for n, p in model.named_parameters() if "lora_B" in n):
        return old
    with torch.no_grad(), model.disable_adapter():
        return completion_logps(model, batch, temperature)


# -- 3. ratios, clipping, surrogate, KL; 4. aggregation ----------------------------------------
def token_terms(logps: torch.Tensor, old: torch.Tensor, ref: torch.Tensor, adv: torch.Tensor,
                mask: torch.Tensor, loss: str, s: StepSettings, beta: float) -> dict[str, torch.Tensor]:
    """Per-token pieces of the clipped objective. GSPO replaces the token ratio by one ratio
    per sequence: exp(mean over its tokens of log pi - log pi_old)."""
    log_ratio = logps - old
    if TRL_LOSS[loss][1] == "sequence":
        log_ratio = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1)).unsqueeze(-1)
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1 - s.epsilon, 1 + s.eps_high)
    A = adv.unsqueeze(-1)
    surrogate = -torch.minimum(ratio * A, clipped * A)
    kl = torch.exp(ref - logps) - (ref - logps) - 1  # k3 estimator of KL(pi || pi_ref) ...
    if s.bias_correction_kl:  # ... on tokens sampled from pi_old: reweighted by the ratio
        kl = kl * ratio
    per_token = surrogate + beta * kl if beta else surrogate
    return {"ratio": ratio.expand_as(logps), "surrogate": surrogate.expand_as(logps), "kl": kl,
            "per_token": per_token, "clip_low": ((ratio < 1 - s.epsilon) & (A < 0)).expand_as(logps),
            "clip_high": ((ratio > 1 + s.eps_high) & (A > 0)).expand_as(logps)}


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, loss: str, max_len: int) -> torch.Tensor:
    """grpo/gspo: mean over sequences of each one's token mean; dapo: mean over all tokens of
    the batch; dr_grpo: sum over tokens / (sequences x max_completion_length)."""
    per_token = per_token * mask
    if loss in ("grpo", "gspo"):
        return (per_token.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    if loss == "dapo":
        return per_token.sum() / mask.sum().clamp(min=1)
    if loss == "dr_grpo":
        return per_token.sum() / (per_token.size(0) * max_len)
    raise ValueError(f"loss {loss!r}: use one of {LOSS_TYPES}")


def hand_loss(logps: torch.Tensor, step: Step, loss: str, beta: float,
              adv: torch.Tensor | None = None) -> torch.Tensor:
    s, mask = step.settings, step.batch.completion_mask
    adv = step.adv if adv is None else adv
    terms = token_terms(logps, step.old_logps, step.ref_logps, adv, mask, loss, s, beta)
    return aggregate(terms["per_token"], mask, loss, s.max_completion_length)


def update_step(model: Any, batch: Batch, adv: torch.Tensor, s: StepSettings) -> torch.Tensor:
    """One AdamW step on this batch with the hand loss (``update_loss``), as the first pass
    of ``num_iterations = 2`` takes it; returns the sampler's log-probs (that pass's forward).
    Afterwards the policy differs from the sampler, as on the second pass."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=s.update_lr, weight_decay=0.0)
    with torch.no_grad():  # the prompt's keys/values without gradient: the backward stays short
        cache = model(input_ids=batch.prompt_ids[:, :-1], attention_mask=batch.prompt_mask[:, :-1],
                      use_cache=True).past_key_values
    ids = torch.cat([batch.prompt_ids[:, -1:], batch.completion_ids[:, :-1]], 1)
    attention = torch.cat([batch.prompt_mask, batch.completion_mask], 1)
    logits = model(input_ids=ids, attention_mask=attention, past_key_values=cache).logits
    logps = torch.log_softmax(logits.float() / s.temperature, -1)
    logps = logps.gather(-1, batch.completion_ids.unsqueeze(-1)).squeeze(-1) * batch.completion_mask
    old = logps.detach()
    terms = token_terms(logps, old, old, adv, batch.completion_mask, s.update_loss, s, 0.0)
    aggregate(terms["per_token"], batch.completion_mask, s.update_loss, s.max_completion_length).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return old


# -- the whole step -----------------------------------------------------------------------------
def dissect(model: Any, tokenizer: Any, rows: list[dict[str, Any]], settings: StepSettings,
            scorer: Scorer) -> Step:
    """Sample, score, compute every intermediate by hand; ``model`` (a PEFT model) ends one
    optimizer step further when ``settings.update_lr > 0``."""
    if not hasattr(model, "disable_adapter"):
        raise TypeError("dissect needs a PEFT model: the reference policy is the adapter switched off")
    s = settings
    model.train()  # no dropout is active in GRPO (TRL disables it; LoRA dropout 0 in our configs)
    batch = sample_batch(model, tokenizer, [r["prompt"] for r in rows], s)
    rewards = reward_table(rows, batch, scorer)
    step = Step(s, batch, rewards, advantage_table(rewards), *[torch.empty(0)] * 3)
    if s.update_lr > 0:
        step.old_logps = update_step(model, batch, step.adv, s)
    else:
        with torch.no_grad():
            step.old_logps = completion_logps(model, batch, s.temperature)
    step.ref_logps = reference_logps(model, batch, s.temperature, step.old_logps)
    with torch.no_grad():
        step.logps = completion_logps(model, batch, s.temperature)
    step.tokens = token_table(step, tokenizer)
    step.losses = pd.DataFrame([
        {"loss": loss, "beta": beta, "hand": float(hand_loss(step.logps, step, loss, beta))}
        for beta in sorted({0.0, s.beta}) for loss in LOSS_TYPES])
    return step


def token_table(step: Step, tokenizer: Any) -> pd.DataFrame:
    """One row per real completion token: log-probs, ratio, A x ratio, clipping, surrogate, KL
    (token-level ratios; ``seq_ratio`` is GSPO's per-sequence ratio)."""
    s, mask = step.settings, step.batch.completion_mask
    terms = token_terms(step.logps, step.old_logps, step.ref_logps, step.adv, mask, "grpo", s, s.beta)
    seq = token_terms(step.logps, step.old_logps, step.ref_logps, step.adv, mask, "gspo", s, 0.0)
    at = mask.bool()
    i, j = mask.nonzero(as_tuple=True)
    adv = step.adv.unsqueeze(-1).expand_as(step.logps)
    columns = {"logp_old": step.old_logps, "logp": step.logps, "logp_ref": step.ref_logps,
               "ratio": terms["ratio"], "advantage": adv, "adv_x_ratio": adv * terms["ratio"],
               "clip_low": terms["clip_low"], "clip_high": terms["clip_high"],
               "surrogate": terms["surrogate"], "kl": terms["kl"], "seq_ratio": seq["ratio"]}
    table = pd.DataFrame({"completion": i.tolist(), "group": (i // step.batch.group_size).tolist(),
                          "position": j.tolist(),
                          "token": [tokenizer.decode([t]) for t in step.batch.completion_ids[at].tolist()]})
    return table.assign(**{k: v[at].detach().cpu().numpy() for k, v in columns.items()})


# -- what the tables say ------------------------------------------------------------------------
def token_weights(step: Step, loss: str, adv: torch.Tensor | None = None) -> torch.Tensor:
    """d loss / d log pi(token) for every token, measured with autograd on the hand loss
    (beta = 0): how hard one step of this loss pushes each token's log-probability."""
    logps = step.logps.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(hand_loss(logps, step, loss, 0.0, adv), logps)
    return grad * step.batch.completion_mask


def length_weighting(step: Step, adv: torch.Tensor | None = None) -> pd.DataFrame:
    """Per completion: length, A, and for each loss the mean |push| per token and the total
    |push| of the completion (sum over its tokens) -- how each loss weighs long vs short."""
    table = step.rewards[["group", "sample", "length"]].copy()
    table["advantage"] = (step.adv if adv is None else adv).tolist()
    lengths = step.batch.completion_mask.sum(1).clamp(min=1)
    for loss in LOSS_TYPES:
        push = token_weights(step, loss, adv).abs().sum(1)
        table[f"{loss}_per_token"] = (push / lengths).tolist()
        table[f"{loss}_total"] = push.tolist()
    return table


def group_shares(step: Step, adv: torch.Tensor | None = None) -> pd.DataFrame:
    """Per group: reward std and each loss's share of the total |push| (a zero-variance group
    has A = 0 on every token, hence share 0: its generation bought nothing)."""
    adv = step.adv if adv is None else adv
    G = step.batch.group_size
    table = pd.DataFrame({"group": range(len(adv) // G),
                          "reward_std": step.advantages.groupby("group")["group_std"].first().to_numpy(),
                          "sum_abs_adv": adv.abs().view(-1, G).sum(1).tolist()})
    for loss in LOSS_TYPES:
        push = token_weights(step, loss, adv).abs().sum(1).view(-1, G).sum(1)
        table[f"{loss}_share"] = (push / push.sum().clamp(min=1e-30)).tolist()
    return table


def group_view(step: Step, group: int) -> pd.DataFrame:
    """One group's completions: length, reward components, group stats, A per scale option."""
    stats = step.advantages[["group_mean", "group_std", "adv_group", "adv_batch", "adv_none"]]
    table = pd.concat([step.rewards, stats], axis=1)
    return table[table["group"] == group].drop(columns="group").set_index("sample")


def pick_completion(step: Step) -> int:
    """The completion to read token by token: the most clipped tokens, then the largest |A|."""
    t = step.tokens.assign(clipped=step.tokens["clip_low"] | step.tokens["clip_high"],
                           abs_adv=step.tokens["advantage"].abs())
    per = t.groupby("completion").agg(clipped=("clipped", "sum"), abs_adv=("abs_adv", "first"))
    return int(per.sort_values(["clipped", "abs_adv"], ascending=False).index[0])


def length_summary(step: Step) -> pd.DataFrame:
    """Per loss, measured: the push per token and per completion, each per unit |A|, of the
    longest completion with A != 0 relative to the shortest one (1 = length-neutral)."""
    table = length_weighting(step)
    table = table[table["advantage"].abs() > 1e-6]
    if table["length"].nunique() < 2:
        raise ValueError("every completion with A != 0 has the same length: nothing to compare")
    short, long = table.loc[table["length"].idxmin()], table.loc[table["length"].idxmax()]
    rows = [{"loss": loss, "short_len": int(short["length"]), "long_len": int(long["length"]),
             **{f"long/short per {unit}": (long[f"{loss}_{col}"] / abs(long["advantage"]))
                / (short[f"{loss}_{col}"] / abs(short["advantage"]))
                for unit, col in (("token", "per_token"), ("completion", "total"))}}
            for loss in LOSS_TYPES]
    return pd.DataFrame(rows).set_index("loss")


def flattened(step: Step, group: int) -> torch.Tensor:
    """The advantages with ``group``'s rewards made equal (its mean): a zero-variance group."""
    table = step.advantages.copy()
    table.loc[table["group"] == group, "reward"] = table.loc[table["group"] == group, "group_mean"]
    adv = advantage_table(table.rename(columns={"reward": "total"}))[f"adv_{step.settings.scale_rewards}"]
    return torch.tensor(adv.to_numpy(), dtype=torch.float32, device=step.batch.completion_ids.device)


# -- TRL's own number ---------------------------------------------------------------------------
class ReplayForward:
    """Calls the model once and answers identical later calls with that output.

    TRL's ``compute_loss(model, inputs)`` runs ``model(...)`` (its fused-head forward) and then
    the loss arithmetic. The forward is the same for every loss setting of one batch, so
    ``compare_with_trl`` computes it once, with TRL's code, and lets each setting's
    ``compute_loss`` reuse it: eight TRL losses for the price of one forward."""

    def __init__(self, model: Any) -> None:
        self.model, self._seen, self._output = model, None, None

    def __call__(self, **kwargs: Any) -> Any:
        seen, self._seen = self._seen, kwargs
        if seen is None or seen.keys() != kwargs.keys() or not all(
                torch.equal(v, seen[k]) if isinstance(v, torch.Tensor) else v == seen[k]
                for k, v in kwargs.items()):
            self._output = self.model(**kwargs)
        return self._output


def trl_loss(model: Any, tokenizer: Any, step: Step, loss: str, beta: float,
             forward: Any = None) -> float:
    """TRL 1.15's loss for the same tensors and model state: a ``GRPOTrainer`` configured for
    ``loss``/``beta``, its ``compute_loss`` on the inputs ``_generate_and_score_completions``
    would have produced (our advantages, old and reference log-probs). ``forward``: what
    compute_loss calls as the model (default the trainer's model; a ``ReplayForward``)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from toolrl_lib.fast.cpu_logprob import install_cpu_logprob_fallback

    install_cpu_logprob_fallback()
    s, b = step.settings, step.batch
    trl_type, level = TRL_LOSS[loss]
    args = GRPOConfig(
        output_dir=str(Path(tempfile.gettempdir()) / "toolrl-anatomy"), report_to=[], save_strategy="no",
        use_cpu=b.completion_ids.device.type == "cpu", bf16=False, disable_tqdm=True,
        per_device_train_batch_size=len(b.texts), num_generations=b.group_size,
        gradient_accumulation_steps=1, max_completion_length=s.max_completion_length,
        temperature=s.temperature, beta=beta, epsilon=s.epsilon, epsilon_high=s.eps_high,
        scale_rewards=s.scale_rewards, loss_type=trl_type, importance_sampling_level=level,
        use_bias_correction_kl=s.bias_correction_kl,
        gradient_checkpointing=False)
    inputs = {"prompt_ids": b.prompt_ids, "prompt_mask": b.prompt_mask,
              "completion_ids": b.completion_ids, "completion_mask": b.completion_mask,
              "advantages": step.adv, "num_items_in_batch": b.completion_mask.sum(),
              "old_per_token_logps": step.old_logps}
    if beta:
        inputs["ref_per_token_logps"] = step.ref_logps
    base, adapters = model.get_base_model(), set(model.peft_config)
    patched_before = base.__dict__.get("forward")
    try:
        trainer = GRPOTrainer(model=model, reward_funcs=_never_called, args=args,
                              train_dataset=Dataset.from_list([{"prompt": "unused"}]),
                              processing_class=tokenizer)
        with torch.no_grad():
            return float(_compute_loss_outside_train(trainer, inputs, forward or trainer.model))
    finally:  # leave the model as it was: TRL patched its forward in place (add_fused_lm_head)
        if patched_before is None:  # and, with beta > 0, added a "ref" copy of the adapter
            base.__dict__.pop("forward", None)
        else:
            base.forward = patched_before
        for name in set(model.peft_config) - adapters:
            model.delete_adapter(name)


def _compute_loss_outside_train(trainer: Any, inputs: dict[str, Any], model: Any) -> torch.Tensor:
    """TRL internal relied on: ``current_gradient_accumulation_steps`` (normally set by
    ``Trainer.train``; TRL divides the loss by it). One accumulation step = the loss as is."""
    trainer.current_gradient_accumulation_steps = 1
    return trainer.compute_loss(model, inputs)


def _never_called(completions: list[Any], **kwargs: Any) -> list[float]:
    raise AssertionError("compare_with_trl passes its own advantages: TRL must not score")

def compare_with_trl(model: Any, tokenizer: Any, step: Step, reuse_forward: bool = True) -> pd.DataFrame:
    """``step.losses`` with TRL's number and the absolute difference next to each hand loss
    (``reuse_forward``: one TRL forward for all rows, see ``ReplayForward``)."""
    table = step.losses.copy()
    forward = ReplayForward(model) if reuse_forward else None
    table["trl"] = [trl_loss(model, tokenizer, step, r.loss, r.beta, forward) for r in table.itertuples()]
    table["abs_diff"] = (table["hand"] - table["trl"]).abs()
    return table


# -- one step of a training run -----------------------------------------------------------------
def dissect_run(run_dir: str | Path, config: Any, num_prompts: int = 2, max_new_tokens: int = 48,
                update_lr: float | None = None, pool: int = 32) -> tuple[Step, Any, Any]:
    """The first GRPO step of the run in ``run_dir``, taken apart: its start model (the primed
    model when priming was on) with a fresh adapter, the run's reward and GRPO settings, one
    AdamW step at the run's learning rate (``update_lr`` overrides it). The prompts are the
    ``num_prompts`` shortest of the run's first ``pool`` training prompts (the cost of every
    forward pass grows with prompt length). Returns (step, policy, tokenizer)."""
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.run_dir import read_run_info, run_base
    from toolrl_lib.train.backend import load_policy, resolve_device
    from toolrl_lib.train.dataset import grpo_rows, load_examples, prompt_length

    info = read_run_info(run_dir)
    g = config.grpo
    settings = StepSettings(
        num_generations=g.num_generations, max_completion_length=max_new_tokens,
        temperature=g.temperature, top_p=g.top_p, epsilon=g.epsilon, epsilon_high=g.epsilon_high,
        beta=g.beta or StepSettings.beta, scale_rewards=g.scale_rewards,
        update_loss=g.loss_type if g.loss_type in LOSS_TYPES else "dapo",
        update_lr=g.learning_rate if update_lr is None else update_lr, seed=config.seed)
    policy, tokenizer = load_policy(config, run_base(run_dir, info), "peft", resolve_device(config.device))
    examples = load_examples(config.data.train_files, pool, seed=config.seed, shuffle=True)
    rows = grpo_rows(examples, get_adapter(info.family), tokenizer, config.data.max_prompt_tokens,
                     enable_thinking=config.model.enable_thinking)
    rows = sorted(rows, key=lambda r: prompt_length(tokenizer, r["prompt"]))[:num_prompts]
    scorer = reward_scorer(config.reward.scheme, info.family, config.reward.weights)
    return dissect(policy, tokenizer, rows, settings, scorer), policy, tokenizer

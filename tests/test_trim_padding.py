"""``fast.trim_padding``: TRL's log-prob forwards cut to each chunk's own columns give TRL's own
log-probs, entropies and gradients; each optimizer step's rows sorted by length keep the step's
rows; a tiny GRPO run trains the same adapter with and without it."""

import contextlib
from types import SimpleNamespace

import pytest
import torch

from toolrl_lib.fast.trim_padding import install, row_spans, sort_steps, trimmed_logps
from toolrl_lib.models import make_tiny_model


def _round():
    """6 rows as TRL pads a round: prompts of 2-7 tokens on the left, completions of 1-6 on the right."""
    pad = 0
    prompts = [[11, 12], [21, 22, 23, 24, 25, 26, 27], [31, 32, 33], [41, 42, 43, 44, 45], [51, 52], [61, 62, 63]]
    completions = [[71, 72, 73, 74, 75, 76], [81], [91, 92], [101, 102, 103, 104], [111], [121, 122, 123]]
    p, c = max(map(len, prompts)), max(map(len, completions))
    ids, mask = [], []
    for prompt, completion in zip(prompts, completions, strict=True):
        ids.append([pad] * (p - len(prompt)) + prompt + completion + [pad] * (c - len(completion)))
        mask.append([0] * (p - len(prompt)) + [1] * (len(prompt) + len(completion)) + [0] * (c - len(completion)))
    return torch.tensor(ids), torch.tensor(mask), c


def _trl(model, ids, mask, keep, batch_size=None, compute_entropy=False, compute_aux_loss=False, **kwargs):
    from trl import GRPOTrainer

    fake = SimpleNamespace(accelerator=SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True))
    return GRPOTrainer._get_per_token_logps_and_entropies(fake, model, ids, mask, keep, batch_size=batch_size,
                                                          compute_entropy=compute_entropy)


def test_row_spans_keep_the_token_before_the_completion_and_one_completion_column():
    mask = torch.tensor([[0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 0, 0]])
    first, end = row_spans(mask, 4)
    assert first.tolist() == [2, 3] and end.tolist() == [5, 5]


@pytest.mark.parametrize("batch_size", [None, 2])
def test_trimmed_logps_match_trl_with_fewer_columns(fused_model, batch_size):
    ids, mask, keep = _round()
    want_logps, want_entropy, _ = _trl(fused_model, ids, mask, keep, batch_size=batch_size, compute_entropy=True)
    params = [p for p in fused_model.parameters() if p.requires_grad]
    real = mask[:, -keep:].bool()
    want_grads = torch.autograd.grad((want_logps * real).sum(), params)
    widths = []

    def counting(model, chunk_ids, chunk_mask, chunk_keep, **kwargs):
        widths.append(chunk_ids.shape[0] * chunk_ids.shape[1])
        return _trl(model, chunk_ids, chunk_mask, chunk_keep, **kwargs)

    logps, entropy = trimmed_logps(counting, fused_model, ids, mask, keep, batch_size, compute_entropy=True)
    assert logps.shape == want_logps.shape and entropy.shape == want_entropy.shape
    assert torch.allclose(logps[real], want_logps[real], atol=1e-5)
    assert torch.allclose(entropy[real], want_entropy[real], atol=1e-5)
    # the point: in chunks of similar rows fewer positions run (one chunk of all rows keeps the longest's)
    assert sum(widths) < ids.numel() if batch_size else sum(widths) == ids.numel()
    grads = torch.autograd.grad((logps * real).sum(), params)
    for got, want in zip(grads, want_grads, strict=True):
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-3)


def test_sort_steps_orders_each_steps_rows_and_keeps_them():
    ids, mask, keep = _round()
    batch = {"prompt_ids": ids[:, :-keep], "prompt_mask": mask[:, :-keep], "completion_ids": ids[:, -keep:],
             "completion_mask": mask[:, -keep:], "advantages": torch.arange(6.0), "kinds": list("abcdef"),
             "num_items_in_batch": torch.tensor(17), "old_per_token_logps": None}
    out = sort_steps(batch, 3)
    lengths = (out["prompt_mask"].sum(1) + out["completion_mask"].sum(1)).tolist()
    assert lengths[:3] == sorted(lengths[:3]) and lengths[3:] == sorted(lengths[3:])
    rows = out["advantages"].long().tolist()
    assert sorted(rows[:3]) == [0, 1, 2] and sorted(rows[3:]) == [3, 4, 5] and rows != list(range(6))
    assert out["kinds"] == [batch["kinds"][r] for r in rows]
    assert torch.equal(out["completion_ids"], batch["completion_ids"][rows])
    assert out["num_items_in_batch"].item() == 17 and out["old_per_token_logps"] is None
    assert sort_steps(batch, 4) is batch  # 6 rows are not steps of 4


def test_install_sorts_only_for_losses_the_split_cannot_change():
    import trl.trainer.grpo_trainer as grpo_module

    original = grpo_module.shuffle_sequence_dict

    class Trainer:
        args = SimpleNamespace(per_device_train_batch_size=3, gradient_accumulation_steps=1, steps_per_generation=2)

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            return None

        def _prepare_inputs(self, generation_batch):
            return grpo_module.shuffle_sequence_dict(generation_batch)

    assert install(Trainer(), "bnpo") == ["_get_per_token_logps_and_entropies"]
    assert install(Trainer(), "dapo", sort=False) == ["_get_per_token_logps_and_entropies"]  # group_batches
    trainer = Trainer()
    assert install(trainer, "dapo") == ["_get_per_token_logps_and_entropies", "_prepare_inputs"]
    ids, mask, keep = _round()
    out = trainer._prepare_inputs({"prompt_mask": mask[:, :-keep], "completion_mask": mask[:, -keep:],
                                   "advantages": torch.arange(6.0)})
    lengths = (out["prompt_mask"].sum(1) + out["completion_mask"].sum(1)).tolist()
    assert lengths[:3] == sorted(lengths[:3]) and lengths[3:] == sorted(lengths[3:])
    assert grpo_module.shuffle_sequence_dict is original


def test_config_refuses_trim_padding_beside_shared_prompt():
    from toolrl_lib.config import ConfigError
    from toolrl_lib.train.config import load_run_config

    with pytest.raises(ConfigError, match="fast.trim_padding"):
        load_run_config(None, ["fast.trim_padding=true", "fast.shared_prompt=true"])


def test_grpo_with_trim_padding_trains_the_same_adapter(tmp_path):
    """Two tiny GRPO runs, same seed (dapo, steps of 2 micro-batches of 4): TRL's forwards vs the cut
    and sorted ones: the same adapter and loss up to float rounding."""
    import pandas as pd
    from safetensors.torch import load_file

    from tests.test_train_run import length_reward, tiny_overrides, toy_examples
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    make_tiny_model(tmp_path / "model")
    write_jsonl(toy_examples(16), tmp_path / "train.jsonl")
    write_jsonl(toy_examples(4, offset=100), tmp_path / "val.jsonl")
    runs = {}
    for trim in ("false", "true"):
        config = load_run_config(None, tiny_overrides(tmp_path, **{
            "validation.enabled": "false", "fast.trim_padding": trim, "grpo.loss_type": "dapo",
            "grpo.gradient_accumulation_steps": 2, "grpo.generation_batch_size": 16, "grpo.max_steps": 4}))
        runs[trim] = train(config, tmp_path / f"run-{trim}", reward_funcs=[length_reward])
    a = load_file(runs["false"] / "last" / "adapter_model.safetensors")
    b = load_file(runs["true"] / "last" / "adapter_model.safetensors")
    assert any(float(t.abs().max()) > 0 for k, t in a.items() if "lora_B" in k)
    for key in a:
        # Adam turns float-rounding gradient differences into ~1e-5 of a 0.01 step; a row paired with
        # another row's advantage, or a wrong column, moves weights by ~1e-2
        assert torch.allclose(a[key], b[key], atol=1e-4), (key, (a[key] - b[key]).abs().max())
    ma, mb = pd.read_csv(runs["false"] / "metrics.csv"), pd.read_csv(runs["true"] / "metrics.csv")
    assert ma["reward"].dropna().tolist() == pytest.approx(mb["reward"].dropna().tolist(), abs=1e-6)
    assert ma["loss"].tolist() == pytest.approx(mb["loss"].tolist(), abs=1e-4)


def test_doctests_of_the_module_and_its_token_benchmark():
    import doctest

    from benchmarks import trim_padding_tokens
    from toolrl_lib.fast import trim_padding

    for module in (trim_padding, trim_padding_tokens):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_token_benchmark_counts_fewer_positions_on_gold_episodes(embedded_model_dir, tmp_path):
    import json

    from benchmarks.trim_padding_tokens import main

    assert main(["--tasks", "28", "--rounds", "3", "--groups", "8", "--out", str(tmp_path)]) == 0
    (row,) = json.loads((tmp_path / "trim_padding_tokens.json").read_text())["rows"]
    assert row["source"] == "gold" and row["real_positions"] < row["trimmed_positions"] < row["trl_positions"]
    assert "| gold | 8 |" in (tmp_path / "trim_padding_tokens.md").read_text()

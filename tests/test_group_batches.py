"""``fast.group_batches``: a round's micro-batches of whole groups, TRL's shuffle otherwise."""

import pytest
import torch

from toolrl_lib.fast.group_batches import group_permutation, install, shuffle_groups


def _round(groups=3, size=2):
    """``groups`` prompts (distinct lengths of padding), each ``size`` consecutive rows."""
    width = groups + 1
    ids = torch.tensor([[0] * (g % 3) + [10 + g] * (width - g % 3) for g in range(groups) for _ in range(size)])
    mask = (ids != 0).long()
    return {"prompt_ids": ids, "prompt_mask": mask, "completion_ids": torch.arange(groups * size)[:, None],
            "advantages": torch.arange(groups * size).float(), "kinds": [f"row{i}" for i in range(groups * size)],
            "num_items_in_batch": torch.tensor(7), "old_per_token_logps": None}


def test_permutation_moves_whole_groups():
    torch.manual_seed(0)
    batch = _round(groups=5, size=4)
    perm = group_permutation(batch["prompt_ids"], batch["prompt_mask"], 4)
    blocks = perm.reshape(5, 4)
    assert sorted(perm.tolist()) == list(range(20))
    assert all(b.tolist() == list(range(b[0].item(), b[0].item() + 4)) and b[0] % 4 == 0 for b in blocks)


def test_rows_that_are_not_groups_get_trls_shuffle():
    batch = _round(groups=3, size=2)
    mixed = {**batch, "prompt_ids": batch["prompt_ids"][[0, 2, 1, 3, 4, 5]]}  # a group split
    assert group_permutation(mixed["prompt_ids"], mixed["prompt_mask"], 2) is None
    assert group_permutation(batch["prompt_ids"][:5], batch["prompt_mask"][:5], 2) is None  # 5 rows, groups of 2
    assert shuffle_groups(mixed, 2, lambda b: "trl's") == "trl's"


def test_shuffle_keeps_each_row_whole_and_groups_together():
    torch.manual_seed(3)
    batch = _round(groups=4, size=2)
    out = shuffle_groups(batch, 2, lambda b: pytest.fail("groups were there"))
    rows = out["completion_ids"].flatten().tolist()
    assert sorted(rows) == list(range(8)) and rows != list(range(8))
    assert [rows[i] // 2 for i in range(0, 8, 2)] == [rows[i + 1] // 2 for i in range(0, 8, 2)]
    assert out["kinds"] == [f"row{r}" for r in rows] and out["advantages"].tolist() == [float(r) for r in rows]
    assert out["num_items_in_batch"].item() == 7 and out["old_per_token_logps"] is None


def test_install_swaps_trls_shuffle_only_inside_prepare_inputs():
    import trl.trainer.grpo_trainer as grpo_module

    original = grpo_module.shuffle_sequence_dict

    class Trainer:
        num_generations = 2

        def _prepare_inputs(self, generation_batch):
            return grpo_module.shuffle_sequence_dict(generation_batch)

    trainer = Trainer()
    assert install(trainer) == "_prepare_inputs"
    torch.manual_seed(1)
    out = trainer._prepare_inputs(_round(groups=6, size=2))
    rows = out["completion_ids"].flatten().tolist()
    assert all(rows[i] // 2 == rows[i + 1] // 2 for i in range(0, 12, 2))
    assert grpo_module.shuffle_sequence_dict is original


def test_grpo_micro_batches_hold_whole_groups(tmp_path, monkeypatch):
    """Tiny GRPO runs, rounds of 8 rows (4 prompts x 2) in 2 micro-batches of 4: with
    group_batches every loss forward sees whole groups; with TRL's row shuffle, split ones."""
    from tests.test_train_run import length_reward, tiny_overrides, toy_examples
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.fast import shared_prompt
    from toolrl_lib.models import make_tiny_model
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    sizes: list[int] = []
    real = shared_prompt.prompt_groups
    monkeypatch.setattr(shared_prompt, "prompt_groups",
                        lambda *a: (lambda groups: sizes.extend(len(r) for _, r in groups) or groups)(real(*a)))
    make_tiny_model(tmp_path / "model")
    write_jsonl(toy_examples(16), tmp_path / "train.jsonl")
    write_jsonl(toy_examples(4, offset=100), tmp_path / "val.jsonl")
    seen = {}
    for grouped in ("false", "true"):
        sizes.clear()
        config = load_run_config(None, tiny_overrides(tmp_path, **{
            "validation.enabled": "false", "fast.shared_prompt": "true", "fast.group_batches": grouped,
            "grpo.generation_batch_size": 8, "grpo.max_steps": 4}))
        train(config, tmp_path / f"run-{grouped}", reward_funcs=[length_reward])
        seen[grouped] = sorted(set(sizes))
    assert seen["true"] == [2]
    assert 1 in seen["false"]

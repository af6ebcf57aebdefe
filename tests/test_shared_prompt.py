"""GRPO's loss forward with shared prompts (``toolrl_lib.fast.shared_prompt``) gives TRL's own
log-probs, entropies and gradients on a tiny model, rows of several prompts mixed."""

import contextlib
from types import SimpleNamespace

import pytest
import torch

from toolrl_lib.fast.shared_prompt import (
    batched_in_chunks,
    batched_shared_prompt_logps,
    chunk_groups,
    install,
    prompt_groups,
    shared_prompt_logps,
)
from toolrl_lib.models import make_tiny_model


def _batch():
    """4 rows: prompts A, B, A, A (left-padded), completions right-padded to 5."""
    pad = 0
    a, b = [11, 12, 13, 14, 15, 16], [21, 22, 23]
    comps = [[31, 32, 33, 34, 35], [41, 42, pad, pad, pad], [51, 52, 53, pad, pad], [61, pad, pad, pad, pad]]
    prompts = [a, b, a, a]
    width = max(map(len, prompts))
    ids, mask = [], []
    for prompt, comp in zip(prompts, comps, strict=True):
        ids.append([pad] * (width - len(prompt)) + prompt + comp)
        mask.append([0] * (width - len(prompt)) + [1] * len(prompt) + [int(t != pad) for t in comp])
    return torch.tensor(ids), torch.tensor(mask), 5


def test_prompt_groups_strip_padding_and_group_equal_prompts():
    ids, mask, c = _batch()
    assert prompt_groups(ids, mask, c) == [([11, 12, 13, 14, 15, 16], [0, 2, 3]), ([21, 22, 23], [1])]


def test_shared_prompt_logps_match_trl(fused_model):
    from trl import GRPOTrainer

    ids, mask, c = _batch()
    fake = SimpleNamespace(accelerator=SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True))
    ref_logps, ref_ent, _ = GRPOTrainer._get_per_token_logps_and_entropies(
        fake, fused_model, ids, mask, c, batch_size=1, compute_entropy=True)
    ref_loss = (ref_logps * mask[:, -c:]).sum()
    ref_grads = torch.autograd.grad(ref_loss, [p for p in fused_model.parameters() if p.requires_grad])
    logps, ent = shared_prompt_logps(fused_model, ids, mask, c, compute_entropy=True)
    real = mask[:, -c:].bool()
    assert torch.allclose(logps[real], ref_logps[real], atol=1e-5)
    assert torch.allclose(ent[real], ref_ent[real], atol=1e-5)
    loss = (logps * mask[:, -c:]).sum()
    grads = torch.autograd.grad(loss, [p for p in fused_model.parameters() if p.requires_grad])
    for got, want in zip(grads, ref_grads, strict=True):
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-3)


def test_batched_shared_prompt_logps_match_trl(fused_model):
    """The GPU path (every prompt of a chunk in one left-padded forward), run here on the CPU:
    TRL's log-probs, entropies and gradients, in row order, for prompts of different lengths."""
    from trl import GRPOTrainer

    ids, mask, c = _batch()
    fake = SimpleNamespace(accelerator=SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True))
    params = [p for p in fused_model.parameters() if p.requires_grad]
    ref_logps, ref_ent, _ = GRPOTrainer._get_per_token_logps_and_entropies(
        fake, fused_model, ids, mask, c, batch_size=1, compute_entropy=True)
    ref_grads = torch.autograd.grad((ref_logps * mask[:, -c:]).sum(), params)
    groups = prompt_groups(ids, mask, c)
    real = mask[:, -c:].bool()
    for logps, ent in (batched_shared_prompt_logps(fused_model, ids, mask, c, True, groups),
                       batched_in_chunks(fused_model, ids, mask, c, True, groups, rows=1)):  # A alone, then B
        assert torch.allclose(logps[real], ref_logps[real], atol=1e-5)
        assert torch.allclose(ent[real], ref_ent[real], atol=1e-5)
        grads = torch.autograd.grad((logps * mask[:, -c:]).sum(), params)
        for got, want in zip(grads, ref_grads, strict=True):
            assert torch.allclose(got, want, atol=1e-4, rtol=1e-3)


def test_chunks_keep_groups_whole():
    groups = [([1, 2], [0, 3]), ([5, 6, 7], [1, 2, 4]), ([8, 9], [5])]
    # shortest prompts first: the two 2-token prompts share a chunk, the 3-token one goes on its own
    assert [[rows for _, rows in chunk] for chunk in chunk_groups(groups, 3)] == [[[0, 3], [5]], [[1, 2, 4]]]
    assert len(chunk_groups(groups, 6)) == 1 and len(chunk_groups(groups, 1)) == 3  # a larger group goes alone


def test_chunks_by_prompt_length_change_no_row(fused_model):
    """Chunks of similar prompt lengths (less padding) give each row what one chunk gives it."""
    ids, mask, c = _batch()
    groups = prompt_groups(ids, mask, c)  # A (6 tokens, rows 0, 2, 3) then B (3 tokens, row 1)
    assert [[len(p) for p, _ in chunk] for chunk in chunk_groups(groups, 3)] == [[3], [6]]
    with torch.no_grad():
        one, _ = batched_in_chunks(fused_model, ids, mask, c, False, groups, rows=4)
        split, _ = batched_in_chunks(fused_model, ids, mask, c, False, groups, rows=3)
    real = mask[:, -c:].bool()
    assert torch.allclose(one[real], split[real], atol=1e-5)


def test_install_routes_shared_batches_and_leaves_the_rest_to_trl(fused_model):
    calls = []

    class Trainer:
        accelerator = SimpleNamespace(autocast=contextlib.nullcontext)

        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                               batch_size=None, compute_entropy=False, compute_aux_loss=False,
                                               **kwargs):
            calls.append(input_ids.shape[0])
            return "trl", None, None

    trainer = Trainer()
    install(trainer)
    ids, mask, c = _batch()
    logps, _, _ = trainer._get_per_token_logps_and_entropies(fused_model, ids, mask, c)
    assert logps.shape == (4, c) and calls == []
    single = trainer._get_per_token_logps_and_entropies(fused_model, ids[:2], mask[:2], c)  # A, B: nothing shared
    assert single[0] == "trl" and calls == [2]


def test_grpo_with_shared_prompt_trains_the_same_adapter(tmp_path, monkeypatch):
    """Two tiny GRPO runs, same seed, TRL's loss forward vs the shared-prompt one: same metrics
    and adapter up to float rounding (micro-batches of 4 hold 2 prompts x 2 completions)."""
    import pandas as pd
    from safetensors.torch import load_file

    from tests.test_train_run import length_reward, tiny_overrides, toy_examples
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.fast import shared_prompt
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.run import train

    used = []
    real = shared_prompt.shared_prompt_logps
    monkeypatch.setattr(shared_prompt, "shared_prompt_logps", lambda *a, **k: used.append(1) or real(*a, **k))
    make_tiny_model(tmp_path / "model")
    write_jsonl(toy_examples(16), tmp_path / "train.jsonl")
    write_jsonl(toy_examples(4, offset=100), tmp_path / "val.jsonl")
    runs = {}
    for shared in ("false", "true"):
        config = load_run_config(None, tiny_overrides(tmp_path, **{
            "fast.rollouts": "library", "validation.enabled": "false", "fast.shared_prompt": shared}))
        runs[shared] = train(config, tmp_path / f"run-{shared}", reward_funcs=[length_reward])
    assert used, "the shared-prompt forward never ran"
    a = load_file(runs["false"] / "last" / "adapter_model.safetensors")
    b = load_file(runs["true"] / "last" / "adapter_model.safetensors")
    assert any(float(t.abs().max()) > 0 for k, t in a.items() if "lora_B" in k)
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-5), key
    ma, mb = pd.read_csv(runs["false"] / "metrics.csv"), pd.read_csv(runs["true"] / "metrics.csv")
    for column in ("loss", "reward", "entropy"):
        if column in ma:
            assert ma[column].tolist() == pytest.approx(mb[column].tolist(), abs=1e-4), column

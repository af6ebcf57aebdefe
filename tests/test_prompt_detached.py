"""Priming with the prompt detached (``toolrl_lib.train.prompt_detached``): TRL's loss value, and
the gradient of a full forward in which every layer's prompt keys/values are cut from autograd."""

import json

import pytest
import torch

from toolrl_lib.models import make_tiny_model
from toolrl_lib.train.prompt_detached import detached_prompt_loss


@pytest.fixture()
def fused_model():
    from trl import SFTTrainer  # noqa: F401  (TRL's module sets up its kernels on import)
    from trl.trainer.utils import add_fused_lm_head

    from toolrl_lib.train.cpu_logprob import install_cpu_logprob_fallback

    install_cpu_logprob_fallback()
    model, _ = make_tiny_model(seed=3)
    add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    return model


def _batch():
    """2 right-padded rows: prompts of 6 and 3 tokens, completions of 4 and 2 scored tokens."""
    rows = [([11, 12, 13, 14, 15, 16], [31, 32, 33, 34]), ([21, 22, 23], [41, 42])]
    width = max(len(p) + len(c) for p, c in rows)
    ids, mask, labels = [], [], []
    for prompt, completion in rows:
        pad = width - len(prompt) - len(completion)
        ids.append(prompt + completion + [0] * pad)
        mask.append([1] * (len(prompt) + len(completion)) + [0] * pad)
        labels.append([-100] * len(prompt) + completion + [-100] * pad)
    return torch.tensor(ids), torch.tensor(mask), torch.tensor(labels), [len(p) for p, _ in rows]


def _trainable(model):
    return [p for p in model.parameters() if p.requires_grad]


def _full_loss(model, ids, mask, labels, cut_before=None):
    """TRL's SFT loss (summed NLL of the scored tokens over their count) from one full forward
    per row; ``cut_before[row]``: detach that row's key/value projections before this position."""
    total, count = 0.0, 0
    for row in range(ids.shape[0]):
        keep = mask[row].bool()
        handles = []
        if cut_before is not None:
            cut = cut_before[row]

            def detach_prefix(_module, _inputs, output, cut=cut):
                return torch.cat([output[:, :cut].detach(), output[:, cut:]], dim=1)

            for layer in model.model.layers:
                handles += [layer.self_attn.k_proj.register_forward_hook(detach_prefix),
                            layer.self_attn.v_proj.register_forward_hook(detach_prefix)]
        try:
            out = model(input_ids=ids[row][keep][None], labels=labels[row][keep][None], fused_lm_head=True)
        finally:
            for handle in handles:
                handle.remove()
        total = total - out.log_probs.sum()
        count += int(out.label_mask.sum())
    return total / count


def test_detached_prompt_loss_is_trls_loss_with_the_prompt_cut_from_the_gradient(fused_model):
    ids, mask, labels, prompt_lengths = _batch()
    loss = detached_prompt_loss(fused_model, ids, mask, labels)
    assert torch.allclose(loss, _full_loss(fused_model, ids, mask, labels), atol=1e-6)
    grads = torch.autograd.grad(loss, _trainable(fused_model))
    # the prompt's last token is re-run with gradients: cut the positions before it
    cut = _full_loss(fused_model, ids, mask, labels, cut_before=[n - 1 for n in prompt_lengths])
    for got, want in zip(grads, torch.autograd.grad(cut, _trainable(fused_model)), strict=True):
        assert torch.allclose(got, want, atol=1e-6, rtol=1e-4)
    full = torch.autograd.grad(_full_loss(fused_model, ids, mask, labels), _trainable(fused_model))
    assert any(not torch.allclose(g, f, atol=1e-6) for g, f in zip(grads, full, strict=True)), \
        "the prompt's gradient paths should be missing"


def test_detached_prompt_loss_honours_the_token_count_and_skips_unscored_rows(fused_model):
    ids, mask, labels, _ = _batch()
    assert detached_prompt_loss(fused_model, ids, mask, torch.full_like(labels, -100)) is None
    alone = detached_prompt_loss(fused_model, ids[:1], mask[:1], labels[:1])
    blank = labels.clone()
    blank[1] = -100
    with_blank = detached_prompt_loss(fused_model, ids, mask, blank, num_items_in_batch=torch.tensor(4))
    assert torch.allclose(alone, with_blank, atol=1e-6)  # row 0 has 4 scored tokens


def test_priming_with_the_prompt_detached_starts_from_the_same_loss(tmp_path):
    """Two tiny primings, same seed: TRL's SFT loss vs the detached one log the same first loss
    (the same forward), then both learn; the marker records the choice."""
    from tests.test_train_run import tiny_overrides, toy_examples
    from toolrl_lib.train.config import load_run_config
    from toolrl_lib.train.priming import PRIMING_MARKER, prime

    make_tiny_model(tmp_path / "model")
    infos = {}
    for gradient in ("true", "false"):
        config = load_run_config(None, tiny_overrides(tmp_path, **{
            "priming.enabled": "true", "priming.max_steps": 4, "priming.batch_size": 2,
            "priming.num_examples": 8, "priming.learning_rate": 0.01,
            "priming.prompt_gradient": gradient}))
        out = prime(config, str(tmp_path / "model"), toy_examples(8), "hermes", tmp_path / f"p-{gradient}", "cpu")
        infos[gradient] = json.loads((out / PRIMING_MARKER).read_text())
    assert infos["true"]["prompt_gradient"] is True and infos["false"]["prompt_gradient"] is False
    full, cut = infos["true"]["losses"], infos["false"]["losses"]
    assert len(full) == len(cut) == 4
    assert cut[0] == pytest.approx(full[0], rel=1e-4)
    assert cut[-1] < cut[0] and full[-1] < full[0]

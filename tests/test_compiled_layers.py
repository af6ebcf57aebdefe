"""``fast.compile_layers``: compiled decoder layers give eager's log-probs and gradients, and one
set of graphs serves every layer (the count does not grow with the layers), on a tiny LoRA model
through both loss paths (TRL's own forward and ``fast.shared_prompt``'s cached one)."""

import contextlib
from types import SimpleNamespace

import pytest
import torch

from toolrl_lib.fast.compiled_layers import compile_layers, decoder_layers, layer_ints_unspecialised
from toolrl_lib.fast.shared_prompt import batched_shared_prompt_logps, prompt_groups
from toolrl_lib.models import make_tiny_model

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _lora_model(layers: int):
    from peft import LoraConfig, get_peft_model
    from trl import GRPOTrainer  # noqa: F401  (TRL's module sets up its kernels on import)
    from trl.trainer.utils import add_fused_lm_head

    from toolrl_lib.fast.cpu_logprob import install_cpu_logprob_fallback

    install_cpu_logprob_fallback()
    model, _ = make_tiny_model(seed=3, num_layers=layers)
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS))
    for name, p in model.named_parameters():
        if "lora_B" in name:  # non-zero adapters, so the LoRA branches count
            torch.nn.init.normal_(p, std=0.1, generator=torch.Generator().manual_seed(len(name)))
    return model


def _batch(width: int, completion: int = 5):
    """4 rows, two prompts (A, B, A, B) of ``width`` and ``width - 2`` tokens, left-padded."""
    g = torch.Generator().manual_seed(width)
    prompts = [torch.randint(5, 200, (width - 2 * i,), generator=g).tolist() for i in range(2)]
    comps = torch.randint(5, 200, (4, completion), generator=g)
    ids, mask = [], []
    for row in range(4):
        p = prompts[row % 2]
        ids.append([0] * (width - len(p)) + p + comps[row].tolist())
        mask.append([0] * (width - len(p)) + [1] * (len(p) + completion))
    return torch.tensor(ids), torch.tensor(mask), completion


def _both_paths(model, width: int):
    """Summed log-probs of TRL's loss forward and the shared-prompt one; gradients accumulate."""
    from trl import GRPOTrainer

    ids, mask, c = _batch(width)
    fake = SimpleNamespace(accelerator=SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True))
    with layer_ints_unspecialised():
        trl_logps, _, _ = GRPOTrainer._get_per_token_logps_and_entropies(fake, model, ids, mask, c, batch_size=4)
        shared, _ = batched_shared_prompt_logps(model, ids, mask, c, False, prompt_groups(ids, mask, c))
    (trl_logps.sum() + shared.sum()).backward()
    return trl_logps.detach(), shared.detach()


def _run(layers: int, compiled: bool):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = _lora_model(layers)
    if compiled:
        assert compile_layers(model, backend="aot_eager") == layers
    outs = [_both_paths(model, w) for w in (9, 12)]
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return outs, grads, counters["stats"]["unique_graphs"]


@pytest.mark.timeout(600)
def test_compiled_layers_match_eager_with_graphs_shared_by_all_layers():
    eager_outs, eager_grads, none = _run(4, compiled=False)
    assert none == 0
    outs, grads, graphs_4 = _run(4, compiled=True)
    for (trl_e, shared_e), (trl_c, shared_c) in zip(eager_outs, outs, strict=True):
        torch.testing.assert_close(trl_c, trl_e, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(shared_c, shared_e, rtol=1e-4, atol=1e-5)
    assert grads.keys() == eager_grads.keys() and any("lora_A" in n for n in grads)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, eager_grads[name], rtol=1e-3, atol=1e-5, msg=name)
    _, _, graphs_2 = _run(2, compiled=True)
    assert graphs_4 > 0
    assert graphs_4 == graphs_2, f"graphs grew with the layers: {graphs_2} for 2, {graphs_4} for 4"


def test_decoder_layers_finds_the_llama_stack_and_names_what_it_lacks():
    model = _lora_model(3)
    assert len(decoder_layers(model)) == 3
    with pytest.raises(ValueError, match="no decoder layers found in Linear"):
        decoder_layers(torch.nn.Linear(2, 2))

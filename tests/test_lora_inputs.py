"""``fast.bf16_lora_inputs``: under bf16 autocast, LoRA branches on bf16 inputs give PEFT's numbers."""

import torch

from toolrl_lib.fast.lora_inputs import install


def _lora_model():
    from peft import LoraConfig, get_peft_model

    from toolrl_lib.models import make_tiny_model

    model, _ = make_tiny_model(seed=4)
    model = get_peft_model(model.to(torch.bfloat16), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    for name, param in model.named_parameters():
        if "lora_B" in name:  # a non-zero adapter, so the branch counts
            torch.nn.init.normal_(param, std=0.05)
    return model


def test_same_logits_and_gradients_without_the_float32_copy():
    from peft.helpers import disable_input_dtype_casting

    model = _lora_model()
    assert {p.dtype for n, p in model.named_parameters() if "lora_" in n} == {torch.float32}
    ids = torch.randint(3, 100, (2, 9))
    results = []
    for off in (False, True):
        with disable_input_dtype_casting(model, active=off), torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=ids).logits
        grads = torch.autograd.grad(logits.float().square().mean(),
                                    [p for p in model.parameters() if p.requires_grad])
        results.append((logits, grads))
    assert torch.equal(results[0][0], results[1][0])
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1], strict=True))


def test_hook_turns_the_cast_off_for_the_call_only():
    model = _lora_model()
    layers = [m for m in model.modules() if hasattr(m, "cast_input_dtype_enabled")]
    seen = []

    class Trainer:
        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None):
            seen.append({m.cast_input_dtype_enabled for m in layers})
            return "logps", None, None

    trainer = Trainer()
    assert install(trainer) == "_get_per_token_logps_and_entropies"
    assert trainer._get_per_token_logps_and_entropies(model, None, None, 1)[0] == "logps"
    assert layers and seen == [{False}] and {m.cast_input_dtype_enabled for m in layers} == {True}

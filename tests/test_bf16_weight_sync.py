"""benchmarks/bf16_weight_sync.py's measurement on the tiny model: a delta far above bf16's step
survives the bf16 merge whole, one far below it vanishes, and the float32 policy with the merged
weights restored is the base again (the next size starts clean)."""

from __future__ import annotations

import pytest

from benchmarks import bf16_weight_sync as sync


@pytest.fixture(scope="module")
def tiny_peft(tiny_model_dir):
    from peft import get_peft_model

    from toolrl_lib.models import load_model
    from toolrl_lib.train.backend import peft_lora_config
    from toolrl_lib.train.config import LoraSection

    model = sync.round_to_bf16(load_model(str(tiny_model_dir), dtype="fp32", device="cpu"))
    return get_peft_model(model, peft_lora_config(LoraSection(r=4, alpha=8))).eval()


SEQUENCES = [[5, 17, 42, 9, 33, 71, 2, 8, 64, 11], [3, 99, 27, 45, 6, 18]]


def test_large_deltas_survive_and_small_ones_vanish(tiny_peft):
    before = sync.token_logprobs(tiny_peft, SEQUENCES)
    large = sync.measure(tiny_peft, SEQUENCES, 0.1, seed=0)
    assert large["changed"] > 0.95 and large["kept"] > 0.99 and large["logp_kept"] > 0.95
    small = sync.measure(tiny_peft, SEQUENCES, 1e-5, seed=0)
    assert small["changed"] < 0.05 and small["kept"] < 0.1 and small["error"] > 0.9
    with tiny_peft.disable_adapter():  # the base weights were put back after each size
        assert sync.token_logprobs(tiny_peft, SEQUENCES).allclose(before)

"""The installed TRL against every private internal toolrl_lib touches (fast/trl_compat.py):
names, parameter order, and the return shapes our callers unpack. A TRL upgrade that changes
one of them fails here, in one place."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from toolrl_lib.fast import trl_compat  # noqa: E402
from toolrl_lib.models import make_tiny_model  # noqa: E402


def test_installed_trl_has_every_private_api_we_use():
    assert trl_compat.check_trl() == []
    trl_compat.require_trl()


def test_check_trl_reports_a_renamed_or_reordered_method():
    class Renamed(GRPOTrainer):
        _tokenize_prompts = None

    class Reordered(GRPOTrainer):
        def _save_checkpoint(self, trial, model):  # swapped
            pass

    assert any("_tokenize_prompts is missing" in p for p in trl_compat.check_trl(Renamed))
    assert any("_save_checkpoint" in p for p in trl_compat.check_trl(Reordered))
    with pytest.raises(RuntimeError, match="trl_compat.py"):
        trl_compat.require_trl(Reordered)


def test_check_trl_reports_a_vllm_generation_without_what_the_engine_process_replaces():
    from trl.generation.vllm_generation import VLLMGeneration

    class Renamed(VLLMGeneration):
        _iter_named_params = None

    assert trl_compat.check_trl(generation_class=Renamed) == ["VLLMGeneration._iter_named_params is missing"]


def test_hooks_compose_in_installation_order():
    class Trainer:
        def _generate_single_turn(self, x):
            return [[x]], None

    trainer, seen = Trainer(), []

    def inner(call: Any, x: Any) -> Any:
        seen.append("inner")
        return call(x + 1)

    def outer(call: Any, x: Any) -> Any:
        seen.append("outer")
        return call(x * 10)

    assert trl_compat.hook_rollout(trainer, inner) == "_generate_single_turn"
    trl_compat.hook_rollout(trainer, outer)
    assert trainer._generate_single_turn(1) == ([[11]], None) and seen == ["outer", "inner"]
    with pytest.raises(RuntimeError, match="no _missing"):
        trl_compat.hook(trainer, "_missing", inner)


def test_torch_load_redirect_is_scoped(tmp_path):
    path = tmp_path / "t.pt"
    torch.save(torch.ones(2), path)
    original = torch.load
    with trl_compat.torch_load_on_plain_cpu():
        assert torch.load(path, map_location="cpu:0", weights_only=True).tolist() == [1.0, 1.0]
    assert torch.load is original


@pytest.fixture(scope="module")
def trainer(tmp_path_factory) -> Any:
    from toolrl_lib.fast.cpu_logprob import install_cpu_logprob_fallback

    install_cpu_logprob_fallback()
    model, tok = make_tiny_model(seed=0)
    prompts = [tok.apply_chat_template([{"role": "user", "content": f"call {i}"}],
                                       add_generation_prompt=True, tokenize=False) for i in range(2)]
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("trl")), use_cpu=True, bf16=False,
                      per_device_train_batch_size=2, num_generations=2, max_completion_length=5,
                      max_steps=1, report_to=[], save_strategy="no", disable_tqdm=True)
    return GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                       args=args, train_dataset=Dataset.from_list([{"prompt": p} for p in prompts]),
                       processing_class=tok), prompts


def test_return_shapes_our_callers_unpack(trainer):
    trainer, prompts = trainer
    ids = trl_compat.tokenize_prompts(trainer, prompts)  # unpacks a 3-tuple
    assert len(ids) == 2 and all(isinstance(t, int) for t in ids[0])
    name, method = trl_compat.generation_method(trainer)
    assert name == "_generate_single_turn"
    with torch.no_grad():
        out = method(ids, None, {}, 1)
    completions = trl_compat.completion_ids_of(name, out)
    assert len(completions) == 2 and all(isinstance(t, int) for t in completions[0])
    width = max(len(t) for t in ids)
    input_ids = torch.tensor([[0] * (width - len(t)) + t for t in ids])
    mask = (torch.arange(width) >= torch.tensor([[width - len(t)] for t in ids])).long()
    with torch.no_grad():
        logps = trl_compat.per_token_logps(trainer, trainer.model, input_ids, mask, 3, 2)
    assert tuple(logps.shape) == (2, 3)
    trl_compat.log_metric(trainer, "train", "toolrl/check", 1.0)
    assert trainer._metrics["train"]["toolrl/check"] == [1.0]
    assert trl_compat.chunked_logprob_kernel() is not None

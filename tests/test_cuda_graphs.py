"""``fast.cuda_graphs``: the shared-prompt forward through the graphed path gives eager's (and
TRL's) log-probs, entropies and gradients, pads to its buckets without changing a number, records
one graph per shape and grad mode (none while the adapters are off), and is wired and validated
as the config says. CUDA graphs cannot be recorded on a CPU: here the path runs with
``capture=False`` (the same function, eagerly), and the recording methods are stood in for by
ones that count their calls."""

import contextlib
import doctest
from types import SimpleNamespace

import pytest
import torch

from tests.test_compiled_layers import _lora_model
from toolrl_lib.fast import cuda_graphs
from toolrl_lib.fast.cuda_graphs import GraphedBackbone
from toolrl_lib.fast.fused_lora import fuse_lora_layers
from toolrl_lib.fast.shared_prompt import (
    batched_in_chunks,
    batched_shared_prompt_logps,
    causal_lm,
    given_backbone,
    install,
    prompt_groups,
)

FAKE_TRAINER = SimpleNamespace(accelerator=SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True))


def _batch(width: int, completion: int = 5, seed: int = 0):
    """6 rows: prompts A, B, C of ``width``, ``width - 3`` and ``width - 1`` tokens (rows A B A C B A),
    left-padded; completions right-padded, some shorter than ``completion``."""
    g = torch.Generator().manual_seed(seed + width)
    prompts = [torch.randint(5, 200, (width - k,), generator=g).tolist() for k in (0, 3, 1)]
    ids, mask = [], []
    for row, which in enumerate((0, 1, 0, 2, 1, 0)):
        p = prompts[which]
        real = completion - (row % 3)
        comp = torch.randint(5, 200, (real,), generator=g).tolist() + [0] * (completion - real)
        ids.append([0] * (width - len(p)) + p + comp)
        mask.append([0] * (width - len(p)) + [1] * (len(p) + real) + [0] * (completion - real))
    return torch.tensor(ids), torch.tensor(mask), completion


@pytest.fixture(scope="module")
def lora_model():
    """A 2-layer LoRA model with TRL's fused head and the fused LoRA projections, as the GPU recipe runs."""
    model = _lora_model(2)
    assert fuse_lora_layers(model) == 14
    return model


def _trainable(model):
    return [p for p in model.parameters() if p.requires_grad]


def test_doctests():
    assert doctest.testmod(cuda_graphs).failed == 0


def test_graphed_forward_gives_trl_and_eager_numbers(lora_model):
    from trl import GRPOTrainer

    graphs = GraphedBackbone(lora_model, capture=False)
    ids, mask, c = _batch(11)
    real = mask[:, -c:].bool()
    params = _trainable(lora_model)
    ref_logps, ref_ent, _ = GRPOTrainer._get_per_token_logps_and_entropies(
        FAKE_TRAINER, lora_model, ids, mask, c, batch_size=6, compute_entropy=True)
    ref_grads = torch.autograd.grad((ref_logps * real).sum(), params)
    groups = prompt_groups(ids, mask, c)
    for use in (None, graphs):
        logps, ent = batched_shared_prompt_logps(lora_model, ids, mask, c, True, groups, graphs=use)
        assert logps.shape == ent.shape == (6, c)
        assert torch.allclose(logps[real], ref_logps[real], atol=1e-5)
        assert torch.allclose(ent[real], ref_ent[real], atol=1e-5)
        grads = torch.autograd.grad((logps * real).sum(), params)
        for got, want in zip(grads, ref_grads, strict=True):
            assert torch.allclose(got, want, atol=1e-4, rtol=1e-3)
    stats = graphs.stats()
    assert (stats["training_graphs"], stats["inference_graphs"], stats["eager_calls"]) == (0, 0, 1)
    assert stats["failed_recordings"] == stats["planned_graphs"] == 0 and stats["errors"] == []


class Recording(GraphedBackbone):
    """Records nothing: each "recording" is counted and runs the function eagerly."""

    def __init__(self, model, widths=()):
        super().__init__(model, capture=True, before_recording=lambda: self.recorded.append("quiet"), widths=widths)
        self.recorded = []
        self.inputs = []  # what each recording was given

    def record_training(self, tensors):
        self.recorded.append(("train", tensors[0].shape[1]))
        self.inputs.append(tensors)
        return lambda *args: self._run(*args)

    def record_inference(self, tensors):
        self.recorded.append(("infer", tensors[0].shape[1]))
        self.inputs.append(tensors)
        return lambda *args: self._run(*args)


def test_one_recording_per_shape_and_grad_mode_none_with_adapters_off(lora_model):
    """Widths 11, 75 and 13 (buckets 64, 128, 64) with gradients, then without: two recordings each;
    with the adapters disabled (TRL's reference pass) the call runs eagerly, nothing recorded."""
    graphs = Recording(lora_model)
    for width in (11, 75, 13):
        ids, mask, c = _batch(width, seed=1)
        groups = prompt_groups(ids, mask, c)
        logps, _ = batched_in_chunks(lora_model, ids, mask, c, False, groups, rows=6, graphs=graphs)
        logps.sum().backward()
        with torch.no_grad():
            graphed, _ = batched_in_chunks(lora_model, ids, mask, c, False, groups, rows=6, graphs=graphs)
            eager, _ = batched_in_chunks(lora_model, ids, mask, c, False, groups, rows=6)
        real = mask[:, -c:].bool()
        assert torch.allclose(graphed[real], eager[real], atol=1e-5)
    assert graphs.recorded == ["quiet", ("train", 64), "quiet", ("infer", 64), "quiet", ("train", 128), "quiet",
                               ("infer", 128)]  # other threads' CUDA calls waited for before each recording
    with lora_model.disable_adapter(), torch.no_grad():
        batched_in_chunks(lora_model, ids, mask, c, False, groups, rows=6, graphs=graphs)
    stats = graphs.stats()
    assert len(graphs.recorded) == 8 and (stats["training_graphs"], stats["inference_graphs"]) == (2, 2)
    assert stats["eager_calls"] == 1 and stats["failed_recordings"] == stats["planned_graphs"] == 0
    late = stats["late_shapes"]  # width 75 met after each mode's first recording (nothing was planned)
    assert stats["late_recordings"] == 2 and late[0].startswith("training (") and late[1].startswith("inference (")
    lora_model.zero_grad()


def test_planned_widths_are_recorded_at_each_modes_first_recording(lora_model):
    """Prompts of 12 to 140 tokens plan widths 64, 128 and 192: the first call with gradients (width
    11, bucket 64) records all three, so a later batch 75 wide (bucket 128) replays one of them; the
    first call without gradients records the three again, in its own mode. The planned inputs have
    the real ones' shapes and run through the backbone."""
    from toolrl_lib.fast.shared_prompt import tail_hidden

    graphs = Recording(lora_model, widths=cuda_graphs.planned_widths([12, 140]))
    for width in (11, 75):
        ids, mask, c = _batch(width, seed=5)
        groups = prompt_groups(ids, mask, c)
        logps, _ = batched_in_chunks(lora_model, ids, mask, c, False, groups, rows=6, graphs=graphs)
        logps.sum().backward()
    assert graphs.recorded == ["quiet", ("train", 64), ("train", 128), ("train", 192)]
    with torch.no_grad():
        batched_in_chunks(lora_model, ids, mask, c, False, groups, rows=6, graphs=graphs)
    assert graphs.recorded[4:] == ["quiet", ("infer", 128), ("infer", 64), ("infer", 192)]
    stats = graphs.stats()
    assert (stats["training_graphs"], stats["inference_graphs"], stats["planned_graphs"]) == (3, 3, 4)
    assert stats["eager_calls"] == 0 and stats["recording_s"] >= 0 and stats["late_recordings"] == 0
    real = graphs.inputs[0]
    for planned in graphs.inputs[1:3]:
        assert [t.dtype for t in planned] == [t.dtype for t in real]
        assert planned[1][:, 0].eq(0).all() and planned[5].shape[1] == planned[0].shape[1] + real[4].shape[1]
        with torch.no_grad():
            hidden = tail_hidden(graphs.backbone, *planned)
        assert hidden.shape[:2] == real[4].shape and torch.isfinite(hidden).all()
    lora_model.zero_grad()


def test_a_failed_recording_runs_its_shape_eagerly_and_is_reported(lora_model):
    class Failing(GraphedBackbone):
        def record_inference(self, tensors):
            raise RuntimeError("operation not permitted when stream is capturing")

    graphs = Failing(lora_model, capture=True)
    ids, mask, c = _batch(11, seed=4)
    groups = prompt_groups(ids, mask, c)
    with torch.no_grad():
        for _ in range(2):
            logps, _ = batched_in_chunks(lora_model, ids, mask, c, False, groups, rows=6, graphs=graphs)
        eager, _ = batched_in_chunks(lora_model, ids, mask, c, False, groups, rows=6)
    real = mask[:, -c:].bool()
    assert torch.allclose(logps[real], eager[real], atol=1e-5)  # padded to the buckets, else the same
    stats = graphs.stats()
    assert stats["failed_recordings"] == 1 and stats["eager_calls"] == 2 and stats["inference_graphs"] == 0
    assert "not permitted when stream is capturing" in stats["errors"][0]


def test_padding_to_the_buckets_changes_no_number(lora_model, monkeypatch):
    """The same rows padded to width buckets of 64 and of 8: the same log-probs."""
    ids, mask, c = _batch(13, seed=2)
    groups = prompt_groups(ids, mask, c)
    real = mask[:, -c:].bool()
    outs = []
    for width, tail in ((64, 32), (8, 8)):
        monkeypatch.setattr(cuda_graphs, "WIDTH_BUCKET", width)
        monkeypatch.setattr(cuda_graphs, "TAIL_BUCKET", tail)
        with torch.no_grad():
            logps, _ = batched_shared_prompt_logps(lora_model, ids, mask, c, False, groups,
                                                   graphs=GraphedBackbone(lora_model, capture=False))
        outs.append(logps[real])
    assert torch.allclose(outs[0], outs[1], atol=1e-5)


def test_given_backbone_is_restored_after_an_error(fused_model):
    lm = causal_lm(fused_model)
    real = lm.model
    with pytest.raises(RuntimeError, match="inside"), given_backbone(lm, torch.zeros(1)):
        assert lm.model(input_ids=None).last_hidden_state.shape == (1,)
        raise RuntimeError("inside")
    assert lm.model is real and dict(lm.named_modules())["model"] is real


def test_graphs_serve_their_own_model_only(lora_model, fused_model):
    """The hook passes the graphs only for the policy they traced; a reference model keeps eager's
    path, and CPU inputs keep the one-prompt-at-a-time path (no graphs)."""
    calls = []

    class Trainer:
        accelerator = SimpleNamespace(autocast=contextlib.nullcontext)

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            raise AssertionError("every batch here shares prompts")

    class Counting(GraphedBackbone):
        def __call__(self, *tensors):
            calls.append(tensors[0].shape)
            return super().__call__(*tensors)

    graphs = Counting(lora_model, capture=False)
    assert graphs.serves(lora_model) and not graphs.serves(fused_model)
    trainer = Trainer()
    install(trainer, graphs)
    ids, mask, c = _batch(9, seed=3)
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(lora_model, ids, mask, c)
    assert logps.shape == (6, c) and calls == []


def test_config_rules_and_install():
    from toolrl_lib import fast
    from toolrl_lib.train.config import ConfigError, load_run_config

    gpu = ["device=cuda", "backend=peft", "fast.shared_prompt=true", "fast.cuda_graphs=true",
           "grpo.gradient_accumulation_steps=1"]
    config = load_run_config(None, gpu)
    for bad in (["device=cpu"], ["fast.shared_prompt=false"], ["fast.compile_layers=true"], ["backend=unsloth"],
                ["grpo.gradient_accumulation_steps=2"]):
        with pytest.raises(ConfigError, match="fast.cuda_graphs"):
            load_run_config(None, [*gpu, *bad])
    with pytest.raises(ValueError, match="fast.cuda_graphs"):
        fast.check_backend(config, "unsloth")
    hooked = []
    trainer = SimpleNamespace(model=None, _get_per_token_logps_and_entropies=lambda *a, **k: hooked.append(1))
    config.fast.group_batches = config.fast.skip_zero_advantage = False
    done = fast.install(trainer, config, device="cpu")  # no GPU: the shared prompts without graphs
    assert done.graphs is None and not any("CUDA graphs" in line for line in done)


def test_the_gpu_check_runs_its_comparisons_eagerly_on_cpu(tmp_path):
    """benchmarks/gpu/cuda_graphs_check.py, the recorded graphs' check on a GPU: on a CPU its plumbing
    (model, micro-batches, comparisons, timings, the JSON) with the graphed path run eagerly."""
    import json

    from benchmarks.gpu.cuda_graphs_check import main

    out = tmp_path / "check.json"
    assert main(["--model", "tiny", "--device", "cpu", "--widths", "40,60,40", "--completion", "16",
                 "--repeats", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["passed"] and not result["capture"]
    assert [(r["width"], r["grad"]) for r in result["rows"]] == [(40, True), (40, False), (60, True), (60, False),
                                                                  (40, True), (40, False)]
    for row in result["rows"]:  # capture off: the "replay" is the padded path itself, exactly
        assert row["capture_logp_max_abs_diff"] == row["capture_entropy_max_abs_diff"] == 0.0
        assert row["repeat_logp_max_abs_diff"] == 0.0
        assert row["padding_logp_max_abs_diff"] < 1e-4 and row["padding_entropy_max_abs_diff"] < 1e-4  # fp32
        if row["grad"]:
            assert row["capture_grad_relative_diff"] == 0.0 and row["padding_grad_relative_diff"] < 1e-4
    assert result["graphs"]["eager_calls"] == 6 * 2  # each row: the compared call and --repeats (1) timed ones



def test_the_gpu_checks_planned_widths_replay_graphs_recorded_from_stand_in_inputs(tmp_path, monkeypatch):
    """--planned: the first call of each kind records every width of --widths, so the later widths'
    rows replay graphs recorded from ``at_width``'s stand-ins. No capture on a CPU: "recording" is
    stood in for by the eager function, and the rows still compare against eager on the real data."""
    import json

    from benchmarks.gpu.cuda_graphs_check import main

    monkeypatch.setattr(GraphedBackbone, "_recordable", lambda self: True)
    monkeypatch.setattr(GraphedBackbone, "record_training", lambda self, tensors: self._run)
    monkeypatch.setattr(GraphedBackbone, "record_inference", lambda self, tensors: self._run)
    out = tmp_path / "check.json"
    assert main(["--model", "tiny", "--device", "cpu", "--widths", "40,100,40", "--completion", "16",
                 "--repeats", "1", "--planned", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["planned"] and result["passed"]
    assert [(r["width"], r["grad"], r["recorded"]) for r in result["rows"]] == [
        (40, True, True), (40, False, True), (100, True, False), (100, False, False), (40, True, False),
        (40, False, False)]  # widths 39 and 99: buckets 64 and 128, both recorded at each kind's first call
    stats = result["graphs"]
    assert (stats["training_graphs"], stats["inference_graphs"], stats["planned_graphs"]) == (2, 2, 2)
    assert stats["eager_calls"] == 0

def test_the_planned_widths_come_from_the_training_prompts():
    from datasets import Dataset

    def tokenizer(texts, add_special_tokens):
        assert add_special_tokens is False  # as TRL tokenizes a rendered prompt
        return {"input_ids": [text.split() for text in texts]}

    trainer = SimpleNamespace(train_dataset=Dataset.from_dict({"prompt": ["a " * 12, "b " * 140, "c " * 50]}),
                              processing_class=tokenizer)
    assert cuda_graphs.dataset_widths(trainer) == [64, 128, 192]
    trainer.train_dataset = Dataset.from_dict({"messages": [[{"role": "user", "content": "x"}]]})
    assert cuda_graphs.dataset_widths(trainer) == []  # not the library's rendered prompts: nothing planned
    assert cuda_graphs.dataset_widths(SimpleNamespace()) == []

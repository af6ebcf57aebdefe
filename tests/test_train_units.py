"""Fast unit tests of the training building blocks (no training, tiny tokenizer only)."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from toolrl_lib.data.example import Example, write_jsonl
from toolrl_lib.train.config import load_run_config
from toolrl_lib.train.filtering import split_by_pass_rate

TOOL = {"name": "add", "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]}}


def example(i: int, text: str = "add 1 and 2") -> Example:
    return Example(id=f"ex-{i}", source="synthetic", messages=[{"role": "user", "content": text}],
                   tools=[TOOL], ground_truth=[{"name": "add", "arguments": {"a": 1, "b": 2}}])


@pytest.fixture(scope="module")
def tokenizer():
    from toolrl_lib.models import make_tiny_tokenizer

    return make_tiny_tokenizer()


def test_split_by_pass_rate_counts_and_switches():
    examples = [example(i) for i in range(5)]
    rates = {"ex-0": 0.0, "ex-1": 1.0, "ex-2": 0.5, "ex-3": 0.25, "ex-4": 0.0}
    kept, report = split_by_pass_rate(examples, rates)
    assert [e.id for e in kept] == ["ex-2", "ex-3"]
    assert (report.always_solved, report.never_solved) == (1, 2)
    assert (report.dropped_always, report.dropped_never, report.kept, report.total) == (1, 2, 2, 5)
    kept, report = split_by_pass_rate(examples, rates, drop_never=False)
    assert [e.id for e in kept] == ["ex-0", "ex-2", "ex-3", "ex-4"] and report.dropped_never == 0
    assert "dropped 1 always-solved" in split_by_pass_rate(examples, rates)[1].summary()


def test_grpo_rows_columns_and_json(tokenizer):
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.dataset import BuildReport, grpo_rows

    adapter = get_adapter("hermes")
    report = BuildReport()
    rows = grpo_rows([example(0), example(1)], adapter, tokenizer, 10_000, privileged=True, report=report)
    assert [r["example_id"] for r in rows] == ["ex-0", "ex-1"]
    assert set(rows[0]) == {"prompt", "ground_truth", "tools", "example_id", "kind", "privileged"}
    assert json.loads(rows[0]["ground_truth"]) == example(0).ground_truth
    assert json.loads(rows[0]["tools"]) == [TOOL]
    assert rows[0]["prompt"] == adapter.render_prompt(example(0), tokenizer)
    assert adapter.parse(rows[0]["privileged"]).calls == example(0).ground_truth
    assert report.to_dict() == {"kept": 2, "dropped": {}, "kinds": {"simple": 2}}
    plain = grpo_rows([example(0)], adapter, tokenizer, 10_000)
    assert "privileged" not in plain[0]


def test_grpo_rows_drop_long_prompts(tokenizer):
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.dataset import BuildReport, grpo_rows, prompt_length

    adapter = get_adapter("hermes")
    short, long = example(0, "hi"), example(1, "add these numbers please " * 40)
    limit = prompt_length(tokenizer, adapter.render_prompt(short, tokenizer))
    report = BuildReport()
    rows = grpo_rows([short, long], adapter, tokenizer, limit, report=report)
    assert [r["example_id"] for r in rows] == ["ex-0"]
    assert report.dropped == {"prompt_too_long": 1}


def _no_call(i: int) -> Example:
    return Example(id=f"nc-{i}", source="synthetic", messages=[{"role": "user", "content": "hi"}],
                   tools=[TOOL], ground_truth=[])


def test_oversample_kinds_repeats_only_the_named_kinds():
    from collections import Counter

    from toolrl_lib.train.dataset import oversample_kinds

    examples = [example(i) for i in range(8)] + [_no_call(i) for i in range(4)]
    assert oversample_kinds(examples, None) == examples
    mixed = oversample_kinds(examples, {"irrelevance": 2.5}, seed=3)
    counts = Counter(e.id for e in mixed)
    assert all(counts[f"ex-{i}"] == 1 for i in range(8))
    assert sorted(counts[f"nc-{i}"] for i in range(4)) == [2, 2, 3, 3]  # 2x, plus half once more
    assert Counter(e.kind for e in mixed) == {"simple": 8, "irrelevance": 10}
    assert mixed == oversample_kinds(examples, {"irrelevance": 2.5}, seed=3)  # seeded
    assert [e.id for e in mixed] != sorted(e.id for e in mixed)  # shuffled, copies spread
    with pytest.raises(ValueError, match="irrelevance"):
        oversample_kinds(examples, {"irrelevance": 0.5})


def test_oversample_config_is_validated_by_name():
    from toolrl_lib.config import ConfigError

    assert load_run_config(None, ["data.oversample_kinds.irrelevance=3"]).data.oversample_kinds == {
        "irrelevance": 3.0}
    with pytest.raises(ConfigError, match="data.oversample_kinds.nocall"):
        load_run_config(None, ["data.oversample_kinds.nocall=3"])
    with pytest.raises(ConfigError, match=">= 1"):
        load_run_config(None, ["data.oversample_kinds.irrelevance=0.5"])


def test_priming_rows_have_the_family_format(tokenizer):
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.dataset import priming_rows

    adapter = get_adapter("hermes")
    rows = priming_rows([example(0)], adapter, tokenizer, 100_000)
    assert rows[0]["completion"] == adapter.render_completion(example(0).ground_truth)
    assert not rows[0]["completion"].endswith(tokenizer.eos_token)  # SFTTrainer appends it
    assert priming_rows([example(0)], adapter, tokenizer, 10) == []


def test_load_examples_missing_file_says_which_notebook(tmp_path):
    from toolrl_lib.train.dataset import load_examples

    with pytest.raises(FileNotFoundError, match="01_data"):
        load_examples([tmp_path / "nope.jsonl"])
    write_jsonl([example(i) for i in range(10)], tmp_path / "a.jsonl")
    first = load_examples([tmp_path / "a.jsonl"], limit=4, seed=1, shuffle=True)
    again = load_examples([tmp_path / "a.jsonl"], limit=4, seed=1, shuffle=True)
    assert [e.id for e in first] == [e.id for e in again] and len(first) == 4


def test_metrics_csv_callback_and_trim(tmp_path):
    from toolrl_lib.train.callbacks import MetricsCSVCallback, read_csv_rows, trim_rows

    path = tmp_path / "metrics.csv"
    cb = MetricsCSVCallback(path)
    for step in (1, 2, 3):
        state = SimpleNamespace(global_step=step, epoch=step / 10)
        cb.on_step_begin(None, state, None)
        cb.on_step_end(None, state, None)
        cb.on_log(None, state, None, logs={"loss": 0.5 * step, "reward": 1.0, **({"kl": 0.1} if step == 3 else {})})
    cb.on_log(None, SimpleNamespace(global_step=3, epoch=0.3), None, logs={"train_runtime": 9.0})
    rows = read_csv_rows(path)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[2]["kl"] == pytest.approx(0.1) and rows[0]["kl"] is None
    assert all(r["step_time"] >= 0 for r in rows)
    assert [r["step"] for r in trim_rows(path, 2)] == [1, 2]
    assert [r["step"] for r in read_csv_rows(path)] == [1, 2]


def test_metrics_csv_appends_a_step_and_rewrites_only_for_a_new_column_or_a_relogged_step(tmp_path):
    """The file is the one a full rewrite of the rows would give, byte for byte, whichever way each step
    was written; a step whose keys the header has is appended in place (same inode), a new column or a
    step logged again rewrites the file (a new one replaces it)."""
    from toolrl_lib.train.callbacks import MetricsCSVCallback, read_csv_rows, write_csv_rows

    path = tmp_path / "metrics.csv"
    cb = MetricsCSVCallback(path, start_rows=[{"step": 1, "epoch": 0.1, "loss": 0.5}])

    def log(step: int, **logs: float) -> int:
        cb.on_log(None, SimpleNamespace(global_step=step, epoch=step / 10), None, logs=logs)
        return path.stat().st_ino

    first = log(2, loss=0.4, reward=1.0)     # the callback's first write: the whole file
    assert log(3, loss=0.3) == first           # known keys, a later step: appended
    assert log(4, loss=0.2, reward=0.5) == first
    assert log(5, loss=0.1, kl=0.01) != first  # a new column: rewritten
    again = path.stat().st_ino
    assert log(5, loss=0.05, kl=0.02) != again  # step 5 logged again: rewritten, one row for it
    rows = read_csv_rows(path)
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5] and rows[-1]["loss"] == pytest.approx(0.05)
    assert rows[2]["reward"] is None and rows[3]["reward"] == pytest.approx(0.5)
    expected = tmp_path / "expected.csv"
    write_csv_rows(expected, cb.rows)
    assert path.read_bytes() == expected.read_bytes()


def test_a_row_cut_short_at_the_end_of_a_csv_is_dropped_not_read(tmp_path):
    from toolrl_lib.train.callbacks import read_csv_rows, write_csv_rows

    path = tmp_path / "metrics.csv"
    write_csv_rows(path, [{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.25}])
    whole = path.read_text()
    path.write_text(whole + "3,0.1")  # a process killed while appending step 3's line
    assert [r["step"] for r in read_csv_rows(path)] == [1, 2]
    path.write_text(whole)
    assert [r["loss"] for r in read_csv_rows(path)] == [0.5, 0.25]


def test_nan_loss_stops_training():
    from toolrl_lib.train.callbacks import NaNStopCallback

    cb = NaNStopCallback()
    control = SimpleNamespace(should_training_stop=False, should_save=True)
    cb.on_log(None, SimpleNamespace(global_step=5), control, logs={"loss": 1.0})
    assert cb.bad_step is None and not control.should_training_stop
    cb.on_log(None, SimpleNamespace(global_step=6), control, logs={"loss": float("nan")})
    assert cb.bad_step == 6 and control.should_training_stop and not control.should_save


def test_forked_rng_leaves_the_stream_untouched():
    import numpy as np
    import torch

    from toolrl_lib.train.callbacks import forked_rng

    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    with forked_rng(seed=123):
        torch.rand(100), random.random(), np.random.rand(7)
    got = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(expected[0], got[0]) and expected[1:] == got[1:]


def test_validation_callback_tracks_best(tmp_path):
    from toolrl_lib.train.callbacks import ValidationCallback, read_csv_rows

    scores = iter([0.2, 0.5, 0.4])
    saved = []
    model = SimpleNamespace(training=True, eval=lambda: None, train=lambda: None)
    cb = ValidationCallback(lambda m: {"binary_mean@2": next(scores)}, tmp_path / "v.csv", 2,
                            "binary_mean@2", lambda m, step, s: saved.append(step))
    for step in range(1, 7):
        cb.on_step_end(None, SimpleNamespace(global_step=step), None, model=model)
    assert saved == [2, 4] and cb.best == pytest.approx(0.5)
    assert [r["step"] for r in read_csv_rows(tmp_path / "v.csv")] == [2, 4, 6]


def test_loss_type_mapping():
    from toolrl_lib.train.trainer import grpo_loss_kwargs

    def kwargs(loss):
        return grpo_loss_kwargs(load_run_config(None, [f"grpo.loss_type={loss}"]))

    assert kwargs("gspo") == {"loss_type": "grpo", "importance_sampling_level": "sequence"}
    assert kwargs("dr_grpo") == {"loss_type": "dr_grpo", "importance_sampling_level": "token"}
    assert kwargs("dapo")["loss_type"] == "dapo"
    assert kwargs("rlsd")["loss_type"] == load_run_config(None).rlsd.base_loss_type


def test_grpo_args_on_cpu(tmp_path):
    from toolrl_lib.run_dir import RunDir
    from toolrl_lib.train.trainer import grpo_args

    config = load_run_config(None, ["grpo.beta=0.04", "grpo.loss_type=gspo", "checkpoint.save_steps=7"])
    args = grpo_args(config, RunDir(tmp_path), "cpu")
    assert args.use_cpu and not args.bf16
    assert args.beta == pytest.approx(0.04) and args.importance_sampling_level == "sequence"
    assert args.save_steps == 7 and args.output_dir == str(tmp_path / "checkpoints")
    assert args.generation_batch_size % args.num_generations == 0


def test_tf32_reaches_the_trainer_on_cuda_only():
    from toolrl_lib.train.backend import precision_kwargs

    # a float32 trainer asks for TF32 matmuls only when model.tf32 says so, and never on the CPU
    # (TrainingArguments refuses tf32 without an Ampere-or-newer GPU)
    assert precision_kwargs("cuda", "fp32", tf32=True) == {"bf16": False, "fp16": False, "tf32": True}
    assert "tf32" not in precision_kwargs("cuda", "fp32")
    assert "tf32" not in precision_kwargs("cpu", "fp32", tf32=True)
    assert load_run_config(None, ["model.tf32=true"]).model.tf32 is True
    assert load_run_config(None).model.tf32 is False


def test_use_tf32_sets_the_matmul_flag_torch_compile_reads():
    """The cuBLAS matmul's own flag, by the new API (the generic one left it "none" on the GPU)."""
    import torch

    from toolrl_lib.train.backend import use_tf32

    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    try:
        matmul.fp32_precision = "ieee"
        assert use_tf32(True, "cpu") is False and matmul.fp32_precision == "ieee"
        assert use_tf32(False, "cuda") is False and matmul.fp32_precision == "ieee"
        assert use_tf32(True, "cuda") is True and matmul.fp32_precision == "tf32"
    finally:
        matmul.fp32_precision = before


def test_backend_choice_on_cpu():
    from toolrl_lib.train.backend import resolve_backend

    assert resolve_backend("auto", "cpu") == "peft"
    assert resolve_backend("peft", "cpu") == "peft"
    with pytest.raises(ValueError, match="CUDA"):
        resolve_backend("unsloth", "cpu")


def test_latest_checkpoint(tmp_path):
    from toolrl_lib.run_dir import latest_checkpoint

    assert latest_checkpoint(tmp_path) is None
    for step in (2, 10, 12):
        (tmp_path / f"checkpoint-{step}").mkdir()
    for step in (2, 10):
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    assert latest_checkpoint(tmp_path).name == "checkpoint-10"  # 12 is incomplete


def test_report_before_after_and_plots(tmp_path):
    import pandas as pd

    from toolrl_lib.train import report

    metrics = pd.DataFrame({"step": [1, 2], "reward": [0.1, 0.3], "reward/format": [0.5, 0.9],
                            "frac_reward_zero_std": [1.0, 0.5], "completions/mean_length": [40, 30]})
    validation = pd.DataFrame({"step": [0, 0, 2], "stage": ["base", "primed", "final"],
                               "binary_mean@2": [0.1, 0.4, 0.5]})
    assert report.before_after(validation, "binary_mean@2") == (0.1, 0.5)
    with pytest.raises(ValueError, match="base"):
        report.before_after(validation[validation.stage != "base"], "binary_mean@2")
    assert report.plot_training_curves(metrics, tmp_path / "c.png").stat().st_size > 1000
    assert report.plot_validation(validation, tmp_path / "v.png").stat().st_size > 1000
    with pytest.raises(FileNotFoundError, match="notebook 03"):
        report.load_tables(tmp_path / "missing")


def test_validation_subset_round_robins_over_kinds():
    from toolrl_lib.data.example import Example
    from toolrl_lib.train.dataset import validation_subset

    def ex(i: int, kind: str) -> Example:
        calls = [] if kind == "irrelevance" else [{"name": "f", "arguments": {}}]
        return Example(id=f"e{i}", source="t", messages=[{"role": "user", "content": "q"}],
                       tools=[{"name": "f", "description": "", "parameters": {"type": "object",
                               "properties": {}}}], ground_truth=calls, kind=kind)

    kinds = ["irrelevance"] * 2 + ["parallel"] * 5 + ["simple"] * 3
    examples = [ex(i, k) for i, k in enumerate(kinds)]
    picked = validation_subset(examples, 5)
    assert [e.id for e in picked] == ["e0", "e2", "e7", "e1", "e3"]
    assert [e.id for e in validation_subset(examples, 3, "first")] == ["e0", "e1", "e2"]
    assert len(validation_subset(examples, 50)) == 10  # never more than there are


def test_one_gpu_per_process_stops_data_parallel():
    from types import SimpleNamespace

    from toolrl_lib.train.backend import one_gpu_per_process

    args = SimpleNamespace(world_size=1, n_gpu=2, _n_gpu=2)
    assert one_gpu_per_process(args)._n_gpu == 1
    launched = SimpleNamespace(world_size=2, n_gpu=1, _n_gpu=1)  # DDP rank: untouched
    assert one_gpu_per_process(launched)._n_gpu == 1


def test_training_arguments_honour_the_single_gpu_pin():
    from transformers import TrainingArguments

    from toolrl_lib.train.backend import one_gpu_per_process

    args = TrainingArguments(output_dir="/tmp/unused", use_cpu=True, report_to=[])
    _ = args.n_gpu  # devices are set up lazily; pretend two GPUs were found
    args._n_gpu = 2
    assert one_gpu_per_process(args).n_gpu == 1


def test_merged_rollouts_need_adapters_not_a_particular_backend():
    from toolrl_lib.config import ConfigError

    # unsloth is allowed: the run checks its patched layers with require_merged_path first
    config = load_run_config("configs/qwen3_8b_h100.yaml", ["fast.merged_generation=true"])
    assert config.backend == "unsloth" and config.fast.merged_generation
    with pytest.raises(ConfigError, match="fast.merged_generation"):
        load_run_config("configs/qwen3_8b_h100.yaml",
                        ["fast.merged_generation=true", "backend=peft", "lora.enabled=false"])

"""The SFT warm start (``toolrl sft``, ``toolrl_lib/train/sft.py``) on a tiny random model (CPU,
seconds): the model folder and ``sft.json``, eval loss and the best checkpoint, a run cut by its
time budget resumed to the same weights, LoRA and full fine-tuning, the loss mask, config errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from toolrl_lib.config import ConfigError
from toolrl_lib.train.config import load_run_config, validate_sft

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tests.test_train_run import write_tiny_setup

    root = write_tiny_setup(tmp_path_factory.mktemp("sft"), train=12)
    (root / "config.yaml").write_text("name: sft-test\n")
    return root


def sft_overrides(root: Path, **extra: object) -> list[str]:
    base = {
        "model.name": str(root / "model"), "model.family": "hermes", "device": "cpu",
        "data.train_files": f"[{root / 'train.jsonl'}]", "data.val_files": f"[{root / 'val.jsonl'}]",
        "sft.batch_size": 4, "sft.epochs": 2, "sft.learning_rate": 0.01, "sft.lora_r": 4,
        "sft.lora_alpha": 8, "sft.eval_steps": 2, "sft.save_steps": 2, "sft.eval_batch_size": 4,
        "logging.progress_bar": "false",
    }
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


def _config(root: Path, **extra: object):
    return validate_sft(load_run_config(None, sft_overrides(root, **extra), check=False))


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(next(Path(folder).glob("*.safetensors"))))


def test_lora_sft_writes_the_best_model_and_its_record(tiny, tmp_path):
    from toolrl_lib.models import load_model
    from toolrl_lib.train.sft import build_sft_trainer, sft

    info = sft(_config(tiny), tmp_path / "out")
    out = tmp_path / "out"
    assert info == json.loads((out / "sft.json").read_text())
    assert info["finished"] is True and info["steps"] == info["max_steps"] == 6  # 12 rows / 4, 2 epochs
    assert info["epochs_done"] == pytest.approx(2.0) and info["method"] == "lora"
    assert info["examples"]["train"]["kept"] == 12 and info["examples"]["validation"]["kept"] == 4
    assert [r["step"] for r in info["eval_loss_history"]] == [2, 4, 6]
    assert info["train_loss_history"] and info["seconds"] > 0
    best = min(info["eval_loss_history"], key=lambda r: r["eval_loss"])
    assert info["best_step"] == best["step"] and info["best_eval_loss"] == pytest.approx(best["eval_loss"])
    assert load_model(str(out / "model"), device="cpu") is not None  # a full folder for model.name
    assert (out / "model" / "config.json").is_file() and not (out / "model" / "adapter_config.json").exists()
    # The saved model is the best checkpoint: its eval loss is the best one recorded.
    check = _config(tiny, **{"model.name": str(out / "model"), "sft.method": "full"})
    trainer = build_sft_trainer(check, tmp_path / "check", "cpu")
    assert trainer.evaluate()["eval_loss"] == pytest.approx(info["best_eval_loss"], abs=1e-4)
    with pytest.raises(ValueError, match="--resume"):
        sft(_config(tiny), out)  # never overwrite a run


def test_a_run_cut_by_its_time_budget_resumes_to_the_same_weights(tiny, tmp_path, capsys):
    from toolrl_lib.cli import main

    # save_total_limit 1 with the best model kept: transformers would delete a cut run's last
    # checkpoint when it is not the best one (the GPU config's setting)
    extra = {"sft.epochs": 1, "sft.max_steps": 5, "sft.lr_scheduler_type": "cosine", "sft.warmup_steps": 1,
             "sft.save_total_limit": 1}
    straight = tmp_path / "straight"
    args = ["sft", "--config", str(tiny / "config.yaml")]
    assert main([*args, "--out", str(straight), *sum((["--set", o] for o in sft_overrides(tiny, **extra)), [])]) == 0
    cut_args = [*args, "--out", str(tmp_path / "cut"),
                *sum((["--set", o] for o in sft_overrides(tiny, **extra, **{"sft.time_budget_s": 1e-9})), [])]
    assert main(cut_args) == 0  # one step, then it saves and stops
    info = json.loads((tmp_path / "cut" / "sft.json").read_text())
    assert info["finished"] is False and info["steps"] == 1 and not (tmp_path / "cut" / "model").exists()
    assert "continue with --resume" in capsys.readouterr().out
    assert main(cut_args) == 2  # without --resume a started run is refused
    calls = 1
    while not json.loads((tmp_path / "cut" / "sft.json").read_text())["finished"]:
        assert main([*cut_args, "--resume"]) == 0
        calls += 1
        assert calls <= 5
    assert calls == 5
    a, b = json.loads((straight / "sft.json").read_text()), json.loads((tmp_path / "cut" / "sft.json").read_text())
    assert [c["to_step"] for c in b["calls"]] == [1, 2, 3, 4, 5]
    assert [c["from_step"] for c in b["calls"]] == [0, 1, 2, 3, 4]  # each call goes on where the last stopped
    assert all(c["stopped_by_time_budget"] for c in b["calls"][:-1])
    for key in ("train_loss_history", "eval_loss_history"):
        assert [r["step"] for r in a[key]] == [r["step"] for r in b[key]]
        for ra, rb in zip(a[key], b[key], strict=True):
            assert ra == pytest.approx(rb, rel=1e-5)
    assert a["best_step"] == b["best_step"]
    wa, wb = _weights(straight / "model"), _weights(tmp_path / "cut" / "model")
    assert wa.keys() == wb.keys()
    base = _weights(tiny / "model")
    assert any(not torch.equal(base[k], wa[k]) for k in base)  # it learned (LoRA merged in)
    for key in wa:
        assert (wa[key] - wb[key]).abs().max().item() <= 1e-6, key
    assert main([*cut_args, "--resume"]) == 0  # a finished run is left as it is
    assert "already finished" in capsys.readouterr().out


def test_full_fine_tuning_changes_every_weight_kind(tiny, tmp_path):
    """Also: the rows tokenised by two processes (sft.dataset_num_proc, as the GPU config does)."""
    from toolrl_lib.train.sft import sft

    info = sft(_config(tiny, **{"sft.method": "full", "sft.max_steps": 2, "sft.learning_rate": 1e-3,
                                "sft.load_best": "false", "sft.dataset_num_proc": 2}), tmp_path / "full")
    assert info["finished"] and info["method"] == "full" and info["model_is"] == "last step"
    assert info["examples"]["train"]["kept"] == 12
    base, tuned = _weights(tiny / "model"), _weights(tmp_path / "full" / "model")
    changed = {k for k in base if not torch.equal(base[k], tuned[k])}
    assert any("embed_tokens" in k for k in changed) and any("norm" in k for k in changed)


def test_the_loss_counts_the_assistant_tokens_only(tiny, tmp_path):
    from toolrl_lib.models import load_tokenizer
    from toolrl_lib.prompts import get_adapter
    from toolrl_lib.train.sft import build_sft_trainer

    trainer = build_sft_trainer(_config(tiny, **{"sft.num_examples": 1}), tmp_path / "m", "cpu")
    assert trainer.args.completion_only_loss is True
    tokenizer = load_tokenizer(str(tiny / "model"))
    for dataset in (trainer.train_dataset, trainer.eval_dataset):
        row = dataset[0]
        labels = trainer.data_collator([row])["labels"][0]
        kept = [int(t) for t in labels if int(t) != -100]
        assert 0 < len(kept) < len(row["input_ids"])
        completion = tokenizer.decode(kept)
        assert "<tool_call>" in completion and "<|im_start|>user" not in completion
        assert completion.endswith(tokenizer.eos_token)
    from tests.test_train_run import toy_examples

    expected = get_adapter("hermes").render_completion(toy_examples(1, offset=100)[0].ground_truth)
    assert tokenizer.decode(kept).startswith(expected.strip()[:20])


@pytest.mark.parametrize(("override", "field"), [
    ("sft.method=qlora", "sft.method"), ("sft.batch_size=0", "sft.batch_size"),
    ("sft.learning_rate=0", "sft.learning_rate"), ("sft.epochs=0", "sft.epochs"),
    ("sft.save_steps=3", "sft.save_steps"), ("sft.time_budget_s=-1", "sft.time_budget_s"),
    ("sft.lora_r=0", "sft.lora_r"), ("sft.eval_steps=0", "sft.eval_steps"),
    ("sft.save_total_limit=0", "sft.save_total_limit"), ("sft.num_examples=-2", "sft.num_examples"),
    ("data.val_files=[]", "data.val_files"), ("sft.warmup_steps=-1", "sft.warmup_steps"),
    ("sft.dataset_num_proc=0", "sft.dataset_num_proc"),
])
def test_bad_sft_settings_name_the_field(override, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        validate_sft(load_run_config(None, ["sft.eval_steps=2", "sft.save_steps=4", override], check=False))


def test_defaults_are_valid_and_full_skips_lora_rank():
    validate_sft(load_run_config(None, [], check=False))
    validate_sft(load_run_config(None, ["sft.method=full", "sft.lora_r=0"], check=False))


def test_the_gpu_config_validates():
    config = validate_sft(load_run_config("configs/sft_embedded_gpu.yaml", check=False))
    assert config.sft.load_best and config.sft.time_budget_s > 0 and config.data.val_files


def test_the_saved_model_is_the_checkpoint_with_the_lowest_eval_loss(tiny, tmp_path, monkeypatch):
    """Eval losses scripted per step (3, 1, 2 at steps 2, 4, 6): model/ is checkpoint-4 merged, not
    the last step."""
    from transformers import Trainer

    from toolrl_lib.train.backend import load_adapter_model
    from toolrl_lib.train.sft import sft

    scripted = {2: 3.0, 4: 1.0, 6: 2.0}
    original = Trainer.evaluation_loop

    def evaluation_loop(self, *args, **kwargs):
        output = original(self, *args, **kwargs)
        output.metrics["eval_loss"] = scripted[self.state.global_step]
        return output

    monkeypatch.setattr(Trainer, "evaluation_loop", evaluation_loop)
    info = sft(_config(tiny), tmp_path / "out")
    assert [r["eval_loss"] for r in info["eval_loss_history"]] == [3.0, 1.0, 2.0]
    assert info["best_step"] == 4 and info["best_eval_loss"] == 1.0 and info["model_is"] == "lowest eval loss"
    best = load_adapter_model(str(tiny / "model"), str(tmp_path / "out" / "checkpoints" / "checkpoint-4"),
                              "fp32", "cpu").state_dict()
    saved = _weights(tmp_path / "out" / "model")
    last = load_adapter_model(str(tiny / "model"), str(tmp_path / "out" / "checkpoints" / "checkpoint-6"),
                              "fp32", "cpu").state_dict()
    assert any((last[k] - saved[k]).abs().max() > 1e-6 for k in saved)  # not the last step
    for key in saved:
        assert (best[key] - saved[key]).abs().max().item() <= 1e-6, key

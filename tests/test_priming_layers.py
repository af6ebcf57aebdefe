"""Priming with LoRA on the top layers only (``priming.top_layers``): the merged model changes
there and nowhere else, and the option is validated and recorded."""

import json

import pytest
import torch
from safetensors.torch import load_file

from toolrl_lib.models import make_tiny_model
from toolrl_lib.train.config import ConfigError, load_run_config


def _weights(folder):
    return load_file(str(next(folder.glob("*.safetensors"))))


def test_top_layers_priming_changes_only_the_top_layer(tmp_path):
    from tests.test_train_run import tiny_overrides, toy_examples
    from toolrl_lib.train.priming import PRIMING_ADAPTER, PRIMING_MARKER, prime

    make_tiny_model(tmp_path / "model")
    config = load_run_config(None, tiny_overrides(tmp_path, **{
        "priming.enabled": "true", "priming.max_steps": 2, "priming.batch_size": 2,
        "priming.num_examples": 4, "priming.learning_rate": 0.05, "priming.top_layers": 1}))
    out = prime(config, str(tmp_path / "model"), toy_examples(4), "hermes", tmp_path / "primed", "cpu")
    assert json.loads((out / PRIMING_MARKER).read_text())["top_layers"] == 1
    base, primed = _weights(tmp_path / "model"), _weights(out)
    layers = 1 + max(int(name.split(".")[2]) for name in base if name.startswith("model.layers."))
    assert layers >= 2
    top = f"model.layers.{layers - 1}."
    changed = {name for name in base if not torch.equal(base[name], primed[name])}
    assert changed, "the priming changed nothing"
    assert all(name.startswith(top) for name in changed), sorted(changed)
    # the merged LoRA is kept beside the model: base + adapter rebuilds the primed weights
    adapter = load_file(str(out / PRIMING_ADAPTER / "adapter_model.safetensors"))
    assert adapter and all("lora_" in name for name in adapter)


def test_top_layers_must_not_be_negative_or_exceed_the_model():
    from types import SimpleNamespace

    from toolrl_lib.train.backend import top_layers

    with pytest.raises(ConfigError, match="priming.top_layers"):
        load_run_config(None, ["priming.enabled=true", "priming.top_layers=-1"])
    with pytest.raises(ValueError, match="has 2 decoder layers"):
        top_layers(SimpleNamespace(config=SimpleNamespace(num_hidden_layers=2)), 3)


def test_rebuilt_primed_model_is_bit_identical(tmp_path):
    """The kept priming LoRA merged into the base again gives the primed weights exactly (same device):
    what a fresh GPU machine rebuilds instead of receiving hundreds of MB."""
    from tests.test_train_run import tiny_overrides, toy_examples
    from toolrl_lib.train import priming

    make_tiny_model(tmp_path / "model")
    config = load_run_config(None, tiny_overrides(tmp_path, **{
        "priming.enabled": "true", "priming.max_steps": 2, "priming.batch_size": 2,
        "priming.num_examples": 4, "priming.learning_rate": 0.05}))
    out = priming.prime(config, str(tmp_path / "model"), toy_examples(4), "hermes", tmp_path / "primed", "cpu")
    again = tmp_path / "again"
    again.mkdir()
    (again / priming.PRIMING_MARKER).write_text((out / priming.PRIMING_MARKER).read_text())
    kept = out / priming.PRIMING_ADAPTER
    priming.rebuild_primed(str(tmp_path / "model"), again, config.model.dtype, "cpu", adapter=kept)
    assert priming.is_primed(again) and (again / priming.PRIMING_ADAPTER / "adapter_config.json").is_file()
    primed, rebuilt, base = _weights(out), _weights(again), _weights(tmp_path / "model")
    assert primed.keys() == rebuilt.keys()
    assert all(torch.equal(primed[name], rebuilt[name]) for name in primed)
    assert any(not torch.equal(primed[name], base[name]) for name in primed)  # the LoRA was merged
    assert json.loads((again / priming.PRIMING_MARKER).read_text())["rebuilt_from"]["adapter"] == str(kept)
    priming.rebuild_primed(str(tmp_path / "model"), again, config.model.dtype, "cpu")  # from its own kept adapter
    assert all(torch.equal(primed[name], t) for name, t in _weights(again).items())
    with pytest.raises(FileNotFoundError, match="no priming LoRA"):
        priming.rebuild_primed(str(tmp_path / "model"), tmp_path / "none", config.model.dtype, "cpu")

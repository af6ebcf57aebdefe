"""``toolrl_lib.fast``: one install call that names every change it makes, and the ``fast:`` config
section (old keys fail with the new name)."""

from types import SimpleNamespace as NS

import pytest

from toolrl_lib import fast
from toolrl_lib.config import ConfigError
from toolrl_lib.train.config import FastSection, GRPOSection, load_run_config, run_config_from_dict


class FakeTrainer:
    """The few GRPOTrainer attributes the hooks read, and the methods they wrap."""

    def __init__(self) -> None:
        self.args = NS(beta=0.0, loss_type="dapo")
        self.accelerator = NS(num_processes=1)
        self.state = NS(global_step=0)

    def compute_loss(self, *args, **kwargs):
        return "loss"

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        return "logps"

    def _generate_and_score_completions(self, *args, **kwargs):
        return "scored"

    def _generate_single_turn(self, *args, **kwargs):
        return "generated"


def config_with(**options):
    return NS(fast=FastSection(**options), grpo=GRPOSection())  # grpo.vllm: off


def test_all_options_off_installs_nothing():
    trainer = FakeTrainer()
    before = dict(vars(trainer))
    off = config_with(skip_zero_advantage=False)
    done = fast.install(trainer, off, device="cpu", backend="peft")
    assert done == [] and vars(trainer) == before  # no method replaced on the instance
    assert fast.rollout_func(off) is None
    fast.undo(done)


def test_install_returns_one_line_per_change_and_hooks_those_methods(tmp_path):
    trainer = FakeTrainer()
    config = config_with(shared_prompt=True, generation_times=True)  # skip_zero_advantage on by default
    done = fast.install(trainer, config, device="cpu", backend="peft", run_root=tmp_path, rank=0)
    assert all(isinstance(line, str) for line in done) and len(done) == 3
    assert any("_get_per_token_logps_and_entropies" in line and "fast.shared_prompt" in line for line in done)
    assert any("compute_loss" in line and "fast.skip_zero_advantage" in line for line in done)
    assert any("generation_times.rank0.jsonl" in line for line in done)
    hooked = {"compute_loss", "_get_per_token_logps_and_entropies", "_generate_single_turn"}
    assert hooked <= set(vars(trainer))  # each wrapped on the instance
    assert done.merged_check is None and not done.loss_mmap


def test_multi_turn_asks_for_the_zero_advantage_skip_only(tmp_path):
    trainer = FakeTrainer()
    config = config_with(shared_prompt=True, generation_times=True, merged_generation=True)
    done = fast.install(trainer, config, device="cpu", multi_turn=True, run_root=tmp_path)
    assert len(done) == 1 and "compute_loss" in done[0]
    assert set(vars(trainer)) - {"args", "accelerator", "state"} == {"compute_loss"}


def test_library_rollouts_come_from_rollout_func_and_refuse_unsloth():
    assert callable(fast.rollout_func(config_with(rollouts="library")))
    fast.check_backend(config_with(rollouts="library"), "peft")
    with pytest.raises(ValueError, match="fast.rollouts"):
        fast.check_backend(config_with(rollouts="library"), "unsloth")


@pytest.mark.parametrize("old, new", [("grpo.rollouts=library", "fast.rollouts"),
                                      ("grpo.merged_generation=true", "fast.merged_generation"),
                                      ("grpo.shared_prompt=true", "fast.shared_prompt"),
                                      ("grpo.loss_mmap_threshold=1", "fast.loss_mmap_threshold"),
                                      ("priming.mmap_threshold=1", "fast.priming_mmap_threshold"),
                                      ("logging.generation_times=true", "fast.generation_times")])
def test_an_old_speed_key_fails_naming_its_new_key(old, new):
    with pytest.raises(ConfigError, match=f"{old.split('=')[0]} moved to {new}"):
        load_run_config(None, [old])
    section, key = old.split("=")[0].split(".")
    with pytest.raises(ConfigError, match=new):
        run_config_from_dict({section: {key: 1}})


def test_the_removed_priming_option_says_why():
    with pytest.raises(ConfigError, match="priming.prompt_gradient: removed"):
        load_run_config(None, ["priming.prompt_gradient=false"])


def test_fast_rules_name_the_fast_keys():
    with pytest.raises(ConfigError, match="fast.loss_mmap_threshold"):
        load_run_config(None, ["fast.loss_mmap_threshold=-1"])
    with pytest.raises(ConfigError, match="fast.rollouts"):
        load_run_config(None, ["fast.rollouts=library", "grpo.loss_type=rlsd"])
    assert load_run_config("configs/smoke.yaml").fast.rollouts == "library"

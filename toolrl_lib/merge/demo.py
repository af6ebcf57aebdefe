"""A demo run: a run directory with a random LoRA adapter on a base model, in the layout
``toolrl_lib.run_dir`` describes. The merge chapter (notebook 04) builds one when notebook 03 has
not trained a run (``demo_if_missing``), so that merge, checks and export can be tried at once;
the merge tests build theirs the same way."""

from __future__ import annotations

from pathlib import Path

from toolrl_lib.run_dir import RunDir, RunInfo, write_run_info


def make_demo_run(
    base_dir: str | Path,
    run_dir: str | Path,
    *,
    init_std: float = 0.02,
    r: int = 4,
    seed: int = 0,
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj"),
    checkpoints: tuple[str, ...] = ("best", "last"),
    family: str = "hermes",
) -> Path:
    """A run with a random LoRA adapter on the model at ``base_dir`` (the embedded model in
    notebook 04), for the merge chapter when notebook 03 has not run. Its adapters have random
    ``lora_B`` of std ``init_std`` (0 = an untrained, no-op adapter); every checkpoint in
    ``checkpoints`` gets the same adapter. Returns ``run_dir``."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(base_dir))
    config = LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=0.0,
                        target_modules=list(target_modules), task_type="CAUSAL_LM")
    model = get_peft_model(base, config)
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, init_std) if init_std > 0 else param.zero_()
    for name in checkpoints:
        model.save_pretrained(run_dir / name)
        tokenizer.save_pretrained(run_dir / name)
    info = RunInfo(base_model=str(base_dir), model_name=str(base_dir), family=family,
                   backend="peft", seed=seed, primed=False, lora=True)
    write_run_info(run_dir, info)
    RunDir(run_dir).config.write_text(f"# demo run: random LoRA (std {init_std})\nseed: {seed}\n",
                                         encoding="utf-8")
    return run_dir

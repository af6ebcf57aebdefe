"""What a merge reads from a training run: the adapter folder to merge, the base it sits on
(through ``toolrl_lib.run_dir``, so a run copied to another machine finds its base again) and the
validation prompts the run was trained on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolrl_lib.merge.checks import ADAPTER_WEIGHTS, stored_dtypes
from toolrl_lib.merge.report import MergeError
from toolrl_lib.run_dir import ADAPTER_CONFIG, checkpoint_dir


def resolve_checkpoint(run_dir: str | Path, checkpoint: str = "best") -> Path:
    """``best`` | ``last`` | ``auto`` (best if saved, else last) | ``checkpoint-<step>`` | a
    path -> the adapter folder to merge (checked to be a PEFT adapter folder)."""
    return check_adapter_folder(checkpoint_dir(run_dir, checkpoint))


def check_adapter_folder(adapter_dir: str | Path) -> Path:
    """A PEFT adapter folder has ``adapter_config.json`` and adapter weights."""
    adapter_dir = Path(adapter_dir)
    if not (adapter_dir / ADAPTER_CONFIG).is_file():
        raise MergeError(
            f"{adapter_dir} has no {ADAPTER_CONFIG}: not a PEFT adapter folder "
            "(a full model folder needs no merge)"
        )
    if not any((adapter_dir / name).is_file() for name in ADAPTER_WEIGHTS):
        raise MergeError(f"{adapter_dir} has {ADAPTER_CONFIG} but no {ADAPTER_WEIGHTS[0]}")
    return adapter_dir


def checkpoint_dtype(base_model: str) -> str | None:
    """The dtype the base checkpoint stores its weights in (``bf16`` | ``fp16`` | ``fp32``):
    a local folder's safetensors headers, else the hub config's ``dtype``; None if unknown."""
    folder = Path(base_model)
    if folder.is_dir():
        counts = stored_dtypes(folder)
        return max(counts, key=counts.__getitem__) if counts else None
    try:
        from transformers import AutoConfig

        dtype = getattr(AutoConfig.from_pretrained(base_model), "dtype", None)
    except (OSError, ValueError):
        return None
    names = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
    return names.get(str(dtype).removeprefix("torch."))


def adapter_base_name(adapter_dir: str | Path) -> str | None:
    config = json.loads((Path(adapter_dir) / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    return config.get("base_model_name_or_path")



def run_settings(run_dir: str | Path) -> dict[str, Any]:
    """What the merge needs from the run's ``config.yaml``: the first validation file
    (``data.val_files``) and whether prompts were rendered with thinking on."""
    import yaml

    from toolrl_lib.paths import resolve

    path = Path(run_dir) / "config.yaml"
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except yaml.YAMLError:
        config = {}
    config = config if isinstance(config, dict) else {}
    files = (config.get("data") or {}).get("val_files")
    return {
        "val_file": resolve(files[0]) if isinstance(files, list) and files else None,
        "enable_thinking": bool((config.get("model") or {}).get("enable_thinking", False)),
    }


def validation_prompts(
    val_file: str | Path, tokenizer: Any, family: str, n: int, enable_thinking: bool = False
) -> list[str]:
    """The first ``n`` validation examples rendered as the model saw them in training."""
    from toolrl_lib.data.example import read_jsonl
    from toolrl_lib.prompts import detect_family, get_adapter

    if family in (None, "", "auto"):
        family = detect_family(tokenizer)
    adapter = get_adapter(family)
    prompts = []
    for example in read_jsonl(val_file):
        if len(prompts) >= n:
            break
        prompts.append(adapter.render_prompt(example, tokenizer, enable_thinking=enable_thinking))
    return prompts


def default_output(run_dir: str | Path) -> Path:
    return Path(run_dir) / "merged"

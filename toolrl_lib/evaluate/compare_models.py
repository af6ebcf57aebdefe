"""The models notebook 05 compares: names in the notebook's parameters resolved to model paths,
the prompt family training used, and a mean@k table for each model on our held-out split."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MERGED = "merged"  # the notebook parameter for "<workdir>/merged, written by notebook 04"


def model_path(spec: str, work: Path) -> str:
    """``"merged"`` is the folder notebook 04 wrote under ``work``; anything else is a model name
    or a folder, passed through."""
    if spec != MERGED:
        return spec
    path = Path(work) / MERGED
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"no merged model at {path}: run notebook 04 (LoRA merge) first with the same "
            "workdir, or set `models` to two model names/folders (e.g. ['embedded', 'embedded'])"
        )
    return str(path)


def resolve_models(models: list[str], labels: list[str], work: Path) -> dict[str, str]:
    """``label -> model path``, one per model; the two lists must have the same, non-zero length."""
    if len(models) != len(labels) or len(models) < 1:
        raise ValueError(f"models and labels must have the same length; got {models} and {labels}")
    return {label: model_path(spec, work) for label, spec in zip(labels, models, strict=True)}


def trained_family(work: Path, family: str = "auto") -> str | None:
    """The prompt family to evaluate with: ``family`` unless it is ``"auto"``, then the family
    notebook 03's run recorded (``<work>/grpo``), else None (detected per model's tokenizer)."""
    if family != "auto":
        return family
    from toolrl_lib.run_dir import RUN_INFO, read_run_info

    run = Path(work) / "grpo"
    recorded = read_run_info(run).family if (run / RUN_INFO).is_file() else "auto"
    return None if recorded == "auto" else recorded


def mean_at_k_table(models: dict[str, str], val_path: Path, family: str | None, *, n: int, k: int,
                    max_new_tokens: int, seed: int = 0, batch_size: int = 8,
                    dtype: str = "auto") -> Any:
    """A pandas DataFrame: one row per model with each scheme's mean@k on the first ``n`` examples
    of ``val_path``, the call rate and the example count. Models are loaded one at a time."""
    import pandas as pd

    from toolrl_lib.data.example import read_jsonl
    from toolrl_lib.evaluate.mean_at_k import mean_at_k
    from toolrl_lib.models import load_model, load_tokenizer
    from toolrl_lib.prompts import detect_family

    if not Path(val_path).is_file():
        raise FileNotFoundError(f"{val_path} not found: run notebook 01 (data) first with the same profile")
    val = list(read_jsonl(val_path))[:n]
    rows = []
    for label, path in models.items():
        tokenizer = load_tokenizer(path)
        model = load_model(path, dtype=dtype)
        result = mean_at_k(model, tokenizer, val, family or detect_family(tokenizer), k=k,
                           max_new_tokens=max_new_tokens, seed=seed, batch_size=batch_size)
        rows.append({"model": label, **result.scores, "call_rate": result.rates()["call_rate"],
                     "n": result.n_examples})
        del model
    return pd.DataFrame(rows)


def pass_at_k_table(models: dict[str, str], val_path: Path, family: str | None, *, examples: int, n: int,
                    max_new_tokens: int, seed: int = 0, batch_size: int = 8,
                    dtype: str = "auto") -> dict[str, dict[str, Any]]:
    """label -> pass@k curves (``pass_at_k.pass_at_k_curves``: overall and by kind) of each model
    on the first ``examples`` examples of ``val_path``, ``n`` samples each (k = 1, 2, 4, ... n),
    our binary reward as the judge. Models are loaded one at a time."""
    from toolrl_lib.data.example import read_jsonl
    from toolrl_lib.evaluate.mean_at_k import mean_at_k
    from toolrl_lib.evaluate.pass_at_k import pass_at_k_curves
    from toolrl_lib.models import load_model, load_tokenizer
    from toolrl_lib.prompts import detect_family

    if not Path(val_path).is_file():
        raise FileNotFoundError(f"{val_path} not found: run notebook 01 (data) first with the same profile")
    val = list(read_jsonl(val_path))[:examples]
    out = {}
    for label, path in models.items():
        tokenizer = load_tokenizer(path)
        model = load_model(path, dtype=dtype)
        result = mean_at_k(model, tokenizer, val, family or detect_family(tokenizer), k=n, schemes=("binary",),
                           max_new_tokens=max_new_tokens, seed=seed, batch_size=batch_size, count_solved=True)
        out[label] = pass_at_k_curves(result.per_example)
        del model
    return out

"""Merge a LoRA adapter into its base model, export a standalone folder, and prove it worked.

Merging is where training silently disappears: an adapter that never left its zero
initialisation, a delta too small for bf16 to represent, a base that is not the one the
adapter was trained on, or a save that drops tensors. So every merge is verified before
the output folder exists at all:

1. the adapter loads completely into the base and its delta ``B @ A * scale`` is non-zero;
2. the merge itself is exact: the merged fp32 model gives the same logits as base+adapter;
3. the delta survives rounding to the output dtype (reported; vanishing entirely is an error);
4. the saved folder reloads with plain ``AutoModelForCausalLM`` (offline), its files store
   the merged weights in that dtype (not just cast to it on load), it holds ``round(W +
   delta)`` at probed weight positions, and its logits stay within the dtype's tolerance
   (``LOGIT_TOLERANCE``) of base+adapter;
5. greedy generations of the reloaded model match base+adapter (differences are listed).

The folder is written to a hidden sibling (``.<name>.partial-*``) and renamed into place
only after every check passed, with ``toolrl_merge.json`` (provenance + verification)
written last: a failed check or an interruption leaves nothing that looks complete.
"""

from __future__ import annotations

import gc
import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from toolrl_lib.fast.profiling import stage
from toolrl_lib.merge.checks import (
    ADAPTER_WEIGHTS,
    DTYPES,
    chat_prompts,
    check_adapter_loaded,
    compare_generations,
    compare_probes,
    delta_stats,
    logit_diff,
    logit_limits,
    prompt_logits,
    stored_dtypes,
    torch_dtype,
    weight_probes,
)
from toolrl_lib.merge.inputs import (
    adapter_base_name,
    check_adapter_folder,
    checkpoint_dtype,
    default_output,
    resolve_checkpoint,
    run_settings,
    validation_prompts,
)
from toolrl_lib.merge.publish import folder_size, provenance, publish, staging_dir
from toolrl_lib.merge.report import (
    BACKENDS,
    MERGE_INFO,
    MergeError,
    MergeOptions,
    MergeReport,
    MergeVerificationError,
)
from toolrl_lib.run_dir import ADAPTER_CONFIG, RUN_INFO, read_run_info, resolve_base, run_base


def save_merged(model: Any, tokenizer: Any, folder: Path) -> None:
    """Write weights (safetensors), tokenizer + chat template and generation config."""
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)


def save_merged_unsloth(adapter_dir: Path, dtype: str, folder: Path) -> None:
    """Unsloth's own merged 16-bit save (runs that trained with Unsloth)."""
    from unsloth import FastLanguageModel

    model, tokenizer = FastLanguageModel.from_pretrained(
        str(adapter_dir), dtype=torch_dtype(dtype), load_in_4bit=False
    )
    model.save_pretrained_merged(str(folder), tokenizer, save_method="merged_16bit")


def choose_backend(
    requested: str, run_backend: str | None, dtype: str, base_dtype: str | None = None
) -> tuple[str, str | None]:
    """``(backend, note)``: Unsloth only when asked for (or the run used it), importable, and
    the base checkpoint is stored in ``dtype`` already: Unsloth's merged 16-bit save rewrites
    the base's own shards in their own dtype (unsloth_zoo ``merge_and_overwrite_lora``), so a
    bf16 base asked for fp16 would come out bf16."""
    import importlib.util

    wanted = run_backend if requested == "auto" else requested
    if wanted != "unsloth":
        return "peft", None
    if dtype == "fp32":
        return "peft", "Unsloth saves merged models in 16 bits only; merged with PEFT for fp32"
    try:
        importable = importlib.util.find_spec("unsloth") is not None
    except (ImportError, ValueError):
        importable = False
    if not importable:
        return "peft", "the run used Unsloth but it is not importable here; merged with PEFT (same math)"
    if base_dtype != dtype:
        return "peft", (f"Unsloth's merged save keeps the base checkpoint's dtype "
                        f"({base_dtype or 'unknown'}), not {dtype}; merged with PEFT (same math)")
    return "unsloth", None


# ---------------------------------------------------------------- the merge


def merge_adapter(
    adapter_dir: str | Path,
    base_model: str,
    out_dir: str | Path,
    *,
    options: MergeOptions | None = None,
    prompts: list[str] | None = None,
    val_file: str | Path | None = None,
    family: str = "auto",
    enable_thinking: bool = False,
    run_dir: str | Path | None = None,
    run_backend: str | None = None,
) -> MergeReport:
    """Merge ``adapter_dir`` into ``base_model``, verify, and publish to ``out_dir``.

    The greedy-generation check uses ``prompts`` (rendered strings), else the first
    examples of ``val_file`` rendered for ``family``, else the fixed prompts. Raises
    ``MergeError`` when the adapter does not fit the base and ``MergeVerificationError``
    when a check fails; in both cases nothing is left at ``out_dir``.
    """
    import torch
    from transformers import AutoModelForCausalLM

    options = options or MergeOptions()
    if options.dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {options.dtype!r}")
    if options.backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {options.backend!r}")
    adapter_dir = check_adapter_folder(adapter_dir)
    out_dir = Path(out_dir)
    if out_dir.exists() and not options.overwrite:
        raise MergeError(f"{out_dir} already exists; pass overwrite=True / --overwrite to replace it")
    run_dir = Path(run_dir) if run_dir else None
    device = _device(options.device)
    backend, note = choose_backend(options.backend, run_backend, options.dtype,
                                   checkpoint_dtype(base_model))
    report = MergeReport(
        output=str(out_dir), base_model=base_model, adapter=str(adapter_dir),
        dtype=options.dtype, backend=backend,
        provenance=provenance(adapter_dir, base_model, run_dir), options=asdict(options),
        notes=[note] if note else [],
    )
    report.sizes["adapter_bytes"] = folder_size(adapter_dir)
    report.sizes["adapter_weights_bytes"] = sum(
        (adapter_dir / n).stat().st_size for n in ADAPTER_WEIGHTS if (adapter_dir / n).is_file()
    )
    timer = _Timer(report.timings)
    tf32 = _disable_tf32()
    staging = staging_dir(out_dir)
    try:
        with timer("load"):
            tokenizer = _load_tokenizer(adapter_dir, base_model)
            base = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.float32).to(device)
            peft_model = _attach_adapter(base, adapter_dir, base_model)
            report.delta = delta_stats(peft_model, options.dtype)
        _check_delta(report, options)  # before the slow reference pass: a no-op stops here
        fixed = chat_prompts(tokenizer)
        if prompts is None and val_file is not None:
            prompts = validation_prompts(val_file, tokenizer, family, options.n_generations,
                                         enable_thinking)
        if not prompts:
            report.notes.append("no validation prompts given: generations use the fixed prompts")
        val_prompts = (prompts or fixed)[: options.n_generations]
        with timer("reference"):
            ref_logits = prompt_logits(peft_model, tokenizer, fixed)
            with peft_model.disable_adapter():
                base_logits = prompt_logits(peft_model, tokenizer, fixed)
            ref_texts = _greedy(peft_model, tokenizer, val_prompts, options.max_new_tokens)
            probes = weight_probes(peft_model, options.dtype)
        scale = float(ref_logits.abs().max())
        report.logits = {"scale": scale, "adapter_effect": logit_diff(ref_logits, base_logits)}
        with timer("merge_and_save"):
            if backend == "peft":
                merged = peft_model.merge_and_unload(safe_merge=True)
                merged_fp32 = logit_diff(prompt_logits(merged, tokenizer, fixed), ref_logits)
                report.logits["merge_fp32_vs_reference"] = merged_fp32
                limits = logit_limits("fp32", scale)
                report.check(
                    "merge is exact (fp32)", _within(merged_fp32, limits),
                    _describe(merged_fp32, limits),
                )
                merged.to(torch_dtype(options.dtype))
                _set_generation_ids(merged, tokenizer)
                save_merged(merged, tokenizer, staging)
                del merged
            del peft_model, base
            _free(device)
            if backend == "unsloth":  # loads its own copy, so ours is freed first
                save_merged_unsloth(adapter_dir, options.dtype, staging)
        with timer("reload_and_compare"):
            _verify_saved(report, staging, tokenizer, fixed, val_prompts, ref_logits, base_logits,
                          ref_texts, probes, options, device)
        report.sizes["merged_bytes"] = folder_size(staging)
        report.passed = not report.failed_checks()
        if not report.passed:
            failed = "; ".join(f"{c['check']}: {c['detail']}" for c in report.failed_checks())
            raise MergeVerificationError(f"merge verification failed: {failed}", report)
        (staging / MERGE_INFO).write_text(json.dumps(report.to_dict(), indent=2), encoding="utf-8")
        publish(staging, out_dir, options.overwrite)
    finally:
        _restore_tf32(tf32)
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return report


def merge_run(
    run_dir: str | Path,
    checkpoint: str = "best",
    out_dir: str | Path | None = None,
    *,
    base_model: str | None = None,
    options: MergeOptions | None = None,
    prompts: list[str] | None = None,
    val_file: str | Path | None = None,
) -> MergeReport:
    """Merge a training run's adapter (``best``/``last``/path) into the base it was trained on.

    Generations are compared on ``val_file`` (default: the run config's first
    ``data.val_files`` entry, when it exists) rendered for the run's model family."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {run_dir} not found (run notebook 03 / `toolrl train` first)")
    info = read_run_info(run_dir)
    adapter_dir = resolve_checkpoint(run_dir, checkpoint)
    if base_model:
        base = resolve_base(base_model, run_dir)
    else:
        base = run_base(run_dir, info) or adapter_base_name(adapter_dir)
    if not base:
        raise MergeError(f"{run_dir / RUN_INFO} names no base_model and the adapter config has none")
    settings = run_settings(run_dir)
    if val_file is None and settings["val_file"] is not None and settings["val_file"].is_file():
        val_file = settings["val_file"]
    with stage("merge + checks"):
        return merge_adapter(
            adapter_dir, resolve_base(base, run_dir), out_dir or default_output(run_dir),
            options=options, prompts=prompts, val_file=val_file, family=info.family,
            enable_thinking=settings["enable_thinking"], run_dir=run_dir,
            run_backend=info.backend,
        )


# ---------------------------------------------------------------- steps of merge_adapter


def _load_tokenizer(adapter_dir: Path, base_model: str) -> Any:
    """The adapter's tokenizer (training may have set pad/eos/template), else the base's."""
    from transformers import AutoTokenizer

    source = str(adapter_dir) if (adapter_dir / "tokenizer_config.json").is_file() else base_model
    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _attach_adapter(base: Any, adapter_dir: Path, base_model: str) -> Any:
    from peft import PeftModel

    trained_on = adapter_base_name(adapter_dir)
    hint = f"the adapter at {adapter_dir} was trained on {trained_on!r}, merging into {base_model!r}"
    try:
        peft_model = PeftModel.from_pretrained(base, str(adapter_dir))
    except (RuntimeError, ValueError, KeyError) as error:
        first = str(error).strip().splitlines()[0][:300]
        raise MergeError(f"adapter does not fit the base model ({hint}): {first}") from error
    problems = check_adapter_loaded(peft_model, adapter_dir)
    if problems:
        raise MergeError(f"adapter does not fit the base model ({hint}): " + "; ".join(problems))
    peft_model.eval()
    return peft_model


def _check_delta(report: MergeReport, options: MergeOptions) -> None:
    stats = report.delta
    nonzero = stats["max_abs"] > 0
    report.check(
        "adapter is not a no-op", nonzero,
        f"{stats['nonzero_modules']}/{stats['lora_modules']} LoRA modules change weights; "
        f"max |delta| {stats['max_abs']:.3g}, ||delta||/||W|| {stats['relative_to_base']:.3g}"
        + ("" if nonzero else " - every lora_B is zero: the training never changed the adapter"),
    )
    if not nonzero:
        raise MergeVerificationError(
            f"adapter {report.adapter} is a no-op: all {stats['lora_modules']} LoRA deltas are "
            "zero (lora_B still at its initialisation?); merging it would silently drop training",
            report,
        )
    survival = stats["survival_fraction"]
    ok = stats["survive_in_dtype"] > 0 and survival >= options.min_delta_survival
    report.check(
        f"delta survives {options.dtype}", ok,
        f"{survival:.1%} of the {stats['changed_weights']} changed weights still differ from the "
        f"base after rounding to {options.dtype}"
        + ("" if ok else f"; the training is lost in {options.dtype}: use --dtype fp32"),
    )
    error = stats["saved_delta_rel_error"]
    if ok and error > 1.0:
        report.notes.append(
            f"in {options.dtype} the saved delta is dominated by rounding (only {survival:.1%} of "
            f"changed weights move; relative error {error:.2g}): the merged model keeps the "
            "training only on average; use --dtype fp32 when exact behaviour matters"
        )


def _verify_saved(
    report: MergeReport, folder: Path, tokenizer: Any, fixed: list[str], val_prompts: list[str],
    ref_logits: Any, base_logits: Any, ref_texts: list[str], probes: dict[str, dict[str, Any]],
    options: MergeOptions, device: str,
) -> None:
    """Reload the written folder the way a user would and compare it with base+adapter."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    dtype = torch_dtype(options.dtype)
    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    leftovers = [n for n in (ADAPTER_CONFIG, *ADAPTER_WEIGHTS) if (folder / n).exists()]
    problems = [f"adapter files left in the folder: {leftovers}"] if leftovers else []
    if getattr(config, "quantization_config", None):
        problems.append("config still has a quantization_config")
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, local_files_only=True)
        reloaded_tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, RuntimeError) as error:
        report.check("reloads with AutoModelForCausalLM (offline)", False, str(error)[:300])
        raise MergeVerificationError(f"the merged folder does not reload: {error}", report) from error
    model = model.to(device)
    # from_pretrained(dtype=...) casts on load, so look at how the files store the merged weights
    stored = stored_dtypes(folder, {f"{name}.weight" for name in probes})
    other = {k: n for k, n in stored.items() if k != options.dtype}
    if other or not stored:
        problems.append(f"merged weights stored as {other or 'no safetensors'}, not {options.dtype}")
    if reloaded_tok.eos_token_id != tokenizer.eos_token_id:
        problems.append(f"eos id {reloaded_tok.eos_token_id} != {tokenizer.eos_token_id}")
    if getattr(tokenizer, "chat_template", None) and not getattr(reloaded_tok, "chat_template", None):
        problems.append("chat template missing after reload")
    report.check(
        "reloads with AutoModelForCausalLM (offline)", not problems,
        "; ".join(problems) or f"{config.architectures[0]} in {options.dtype}, tokenizer + chat template ok",
    )
    weights = compare_probes(model, probes)
    report.delta["saved_probes"] = weights
    visible, matched = weights["delta_visible"], weights["delta_matched"]
    # PEFT writes exactly round(W + delta); another merge path may round differently
    ok = not weights["missing_modules"] and (visible == 0 or matched >= 0.9 * visible)
    report.check(
        "saved weights carry the delta", ok,
        f"{matched}/{visible} probed weights where the delta shows hold the merged value "
        f"({weights['exact']}/{weights['probed']} exact overall)"
        + (f"; modules missing: {weights['missing_modules']}" if weights["missing_modules"] else "")
        + ("" if ok else " - the saved folder does not contain the merged weights"
           + (f" (stored as {sorted(other)}: rounded in another dtype)" if other else "")),
    )
    logits = prompt_logits(model, tokenizer, fixed)
    scale = report.logits["scale"]
    limits = logit_limits(options.dtype, scale, options.logit_tolerance)
    saved = logit_diff(logits, ref_logits)
    report.logits["saved_vs_reference"] = saved
    report.logits["saved_vs_base"] = logit_diff(logits, base_logits)
    report.logits["limits"] = limits
    report.check(f"logits match base+adapter ({options.dtype})", _within(saved, limits),
                 _describe(saved, limits))
    texts = _greedy(model, tokenizer, val_prompts, options.max_new_tokens)
    report.generations = compare_generations(ref_texts, texts, val_prompts)
    differing = [g["index"] for g in report.generations if not g["identical"]]
    fraction = len(differing) / max(1, len(texts))
    report.check(
        "greedy generations match", fraction <= options.max_generation_mismatch,
        f"{len(texts) - len(differing)}/{len(texts)} identical"
        + (f"; differing prompts: {differing}" if differing else ""),
    )
    del model
    _free(device)


def _greedy(model: Any, tokenizer: Any, prompts: list[str], max_new_tokens: int) -> list[str]:
    from toolrl_lib.generation import generate

    return [k[0] for k in generate(model, tokenizer, prompts, max_new_tokens=max_new_tokens,
                                   do_sample=False, batch_size=8)]


def _set_generation_ids(model: Any, tokenizer: Any) -> None:
    config = model.generation_config
    if config.eos_token_id is None:
        config.eos_token_id = tokenizer.eos_token_id
    if config.pad_token_id is None:
        config.pad_token_id = tokenizer.pad_token_id


def _within(measured: dict[str, float], limits: dict[str, float]) -> bool:
    return measured["max_abs"] <= limits["max_abs"] and measured["mean_abs"] <= limits["mean_abs"]


def _describe(measured: dict[str, float], limits: dict[str, float]) -> str:
    return (f"max |diff| {measured['max_abs']:.3g} (limit {limits['max_abs']:.3g}), "
            f"mean {measured['mean_abs']:.3g} (limit {limits['mean_abs']:.3g})")


def _device(name: str) -> str:
    if name != "auto":
        return name
    from toolrl_lib.models import default_device

    return default_device()


def _disable_tf32() -> tuple[bool, bool] | None:
    """TF32 matmuls would blur the fp32 comparisons on GPU; switch them off while checking."""
    import torch

    if not torch.cuda.is_available():
        return None
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return old


def _restore_tf32(old: tuple[bool, bool] | None) -> None:
    import torch

    if old is not None:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _free(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


class _Timer:
    """``with timer("step"):`` records wall seconds into a dict."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into = into

    def __call__(self, name: str) -> _Timer:
        self.name = name
        return self

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.into[self.name] = round(time.perf_counter() - self.start, 3)

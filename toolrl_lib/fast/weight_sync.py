"""TRL's vLLM weight sync without writing into the policy's weights.

Before each round TRL hands vLLM the LoRA-merged weights: it merges the adapters into the
model's own weights (PEFT's ``merge_adapter``: ``W += s B A``), reads every weight, and unmerges
(``W -= s B A``). With bf16 base weights, the course's dtype, that round trip is not exact: each
half rounds to bf16, so the frozen base weights take a small random step every sync and wander
further the longer the run. ``tests/test_weight_sync.py`` shows it with TRL's own method: after 20
syncs of a tiny bf16 model a quarter of an adapted weight's elements had changed.

Here each adapted weight is yielded as a fresh tensor, ``W + s B A`` summed in float32 and
rounded once: the tensor TRL's first merge gives, bit for bit, with ``W`` never written. Other
weights are yielded as they are, under the names TRL gives them. One adapted weight's copy lives
at a time while the consumer loads each as it comes (TRL's in-process load, or
``engine_process.IPCWeightSync``; its first sync, which sizes its buffers, holds them all), and
there is no unmerge pass. Installed by ``train/trainer.py`` whenever TRL's engine is on with the
peft backend; not where TRL shards the weights (FSDP), nor for DoRA, LoRA biases or an adapter
already merged, where TRL's own sync stays (``install`` says why).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def adapted_layers(model: Any) -> dict[int, Any]:
    """``id`` of each LoRA-adapted ``torch.nn.Linear`` weight -> its PEFT LoRA layer; raises
    ``ValueError`` for a layer this sync cannot merge exactly as PEFT does (DoRA, a base that is
    not ``nn.Linear``, an adapter already merged)."""
    import torch

    from toolrl_lib.fast.merged_generation import lora_layers

    layers: dict[int, Any] = {}
    for module in lora_layers(model):
        base = module.get_base_layer()
        dora, bias = any(module.use_dora.values()), any(getattr(module, "lora_bias", {}).values())
        if not isinstance(base, torch.nn.Linear) or module.merged or dora or bias:
            raise ValueError(f"{type(module).__name__} over {type(base).__name__} (merged={module.merged}, "
                             f"DoRA={dora}, lora_bias={bias}): only unmerged plain LoRA on nn.Linear")
        layers[id(base.weight)] = module
    return layers


def merged_weight(layer: Any) -> Any:
    """``W + sum of s B A`` over the layer's active adapters, in float32, rounded once to ``W``'s dtype."""
    weight = layer.get_base_layer().weight
    total = weight.detach().float()
    for name in layer.active_adapters:
        if name in layer.lora_A:
            total = total + layer.get_delta_weight(name).float()
    return total.to(weight.dtype)


def merged_named_params(generation: Any) -> Iterator[tuple[str, Any]]:
    """What TRL's ``VLLMGeneration._iter_named_params`` yields for a PEFT model (the same names,
    the same merged values), the model left untouched."""
    import torch

    model = generation.model
    layers = adapted_layers(model)
    with generation._dist.gather_params(list(model.parameters())), torch.no_grad():
        for name, param in model.named_parameters():
            name = name.removeprefix("base_model.model.").replace(".base_layer", "")
            if model.prefix in name or "original_module" in name:  # adapters, and a saved module's original
                continue
            name = generation._fix_param_name_to_vllm(name, extra_prefixes=["modules_to_save.default."])
            layer = layers.get(id(param))
            yield name, (param.data if layer is None else merged_weight(layer))


def install(trainer: Any) -> str | None:
    """Replace ``trainer.vllm_generation._iter_named_params`` (which every TRL sync path reads) with
    ``merged_named_params``; returns what changed, or why TRL's own sync stays."""
    from accelerate.utils import is_peft_model

    from toolrl_lib.fast import trl_compat

    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or not is_peft_model(generation.model):
        return None
    trl_compat.require_trl()  # the VLLMGeneration internals read here among them
    if generation._dist.is_fsdp:
        return "vLLM weight sync: TRL's own (FSDP gathers the weights its way)"
    try:
        layers = adapted_layers(generation.model)
    except ValueError as error:
        return f"vLLM weight sync: TRL's own merge and unmerge ({error})"
    generation._iter_named_params = lambda: merged_named_params(generation)
    return (f"VLLMGeneration._iter_named_params: {len(layers)} adapted weights handed to vLLM as W + sBA copies, "
            "the policy's bf16 weights never merged into (TRL's merge and unmerge round trip drifts them)")


__all__ = ["adapted_layers", "install", "merged_named_params", "merged_weight"]

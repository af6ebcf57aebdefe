"""The loss forwards' decoder layers compiled once, for all layers (regional ``torch.compile``).

After ``fast.shared_prompt`` and ``fast.bf16_lora_inputs`` an H200 GRPO step of the embedded
model is bound by the host, not the GPU: ~5,000 small kernels per forward and backward, each
launched by eager PyTorch, and the GPU busy 27% of the step (``benchmarks/results/
grpo_step_profile.md``). A decoder layer with LoRA on its seven projections is ~70 eager ops;
compiled, its norms, rotary embedding, LoRA scale-and-add and gated MLP fuse into a handful of
kernels, forward and backward, launched from generated code.

One compiled layer serves every layer (PyTorch's "regional compilation": parameters are graph
inputs), provided nothing layer-specific is baked into the graph. Two things are, by default:
the ``layer_idx`` int of each attention module and the key/value cache's list of layers, which
dynamo reads while tracing ``cache.update`` — one graph per layer, past dynamo's recompile limit.
So the layers run with ``allow_unspec_int_on_nn_module`` (ints on modules are graph inputs), and
``fast.shared_prompt``'s cache keeps its ``update`` out of the graph (``shared_prompt._layer_cache_class``).
``tests/test_compiled_layers.py`` checks that the number of graphs does not grow with the layers
and that log-probs and gradients are eager's.

Only the trainer's loss and log-prob forwards are meant to run here: the config requires vLLM
for the rollouts and the validation (transformers' ``generate`` with its own cache would
recompile per layer). Compiling costs start-up time (seconds per graph on a GPU, about ten graphs:
with/without gradients, prompt/completion calls); dynamic shapes, so new lengths reuse them.
"""

from __future__ import annotations

from typing import Any

from toolrl_lib.fast import trl_compat


def decoder_layers(model: Any) -> Any:
    """The ``nn.ModuleList`` of decoder layers of a (PEFT-wrapped) causal LM."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder = base.get_decoder() if hasattr(base, "get_decoder") else getattr(base, "model", None)
    layers = getattr(decoder, "layers", None)
    if layers is None or len(layers) == 0:
        raise ValueError(f"fast.compile_layers: no decoder layers found in {type(base).__name__} "
                         f"(looked for get_decoder().layers)")
    return layers


def compile_layers(model: Any, backend: str = "inductor") -> int:
    """Compile each decoder layer of ``model`` in place (names and parameters unchanged, so
    checkpoints and vLLM's weight sync see the same model); returns how many. ``backend``:
    torch.compile's (the tests use ``aot_eager``: the same graphs, no code generation)."""
    layers = decoder_layers(model)
    for layer in layers:
        layer.compile(dynamic=True, backend=backend)
    return len(layers)


def layer_ints_unspecialised() -> Any:
    """The context the compiled layers must trace in: module ints (``layer_idx``) are inputs."""
    import torch._dynamo

    return torch._dynamo.config.patch(allow_unspec_int_on_nn_module=True)


def install(trainer: Any) -> str:
    """Compile the trainer's decoder layers; its log-prob forwards trace them layer-agnostically."""
    n = compile_layers(trainer.accelerator.unwrap_model(trainer.model))

    def per_token(call: Any, model: Any, *args: Any, **kwargs: Any) -> Any:
        with layer_ints_unspecialised():
            return call(model, *args, **kwargs)

    method = trl_compat.hook(trainer, "_get_per_token_logps_and_entropies", per_token)
    return f"{method} ({n} layers)"

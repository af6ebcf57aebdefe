"""The speed and memory layer: everything that makes a run faster or smaller, and nothing else.

The core path (``toolrl_lib.generation``, ``toolrl_lib.train``) reads without this package: a
GRPO run with every option below off is TRL's own loop on our dataset, rewards and callbacks.
Each option is one field of the run config's ``fast:`` section (``train/config.py``
``FastSection``, validated by ``_fast_rules``); ``install`` applies the trainer hooks and returns
one line per change it made, which the run prints, so a run says what it altered.

Options (``fast.<name>``; measured on the course's 2-core CPU unless said otherwise)

``rollouts: library``
    GRPO completions sampled by ``toolrl_lib.generation`` through TRL's public ``rollout_func``
    (``library_rollouts.py``) instead of transformers' ``generate``: one prefill per prompt for
    its whole group, an in-place cache. Peft backend, plain GRPO losses. On in ``smoke.yaml``;
    ``rollout_func(config)`` returns it for the trainer's constructor.
``merged_generation: true``
    Roll out through ``W + sBA`` in a copy of the adapted weights, adapters off
    (``merged_generation.py``): one matmul per projection while decoding instead of three. 2
    GRPO steps 53 -> 46 s, same samples, peak 3.58 -> 3.49 GiB; the workbook's GRPO 124 -> 108 s
    (``benchmarks/results/workbook_profile.md``); with unsloth on a GPU the fastest measured
    (``benchmarks/results/grpo_throughput_qwen3_8b.md``, ``merged_generation_cpu.md``). Hooks TRL's
    generation method (rollouts ``trl``), after checking the merged path under unsloth; library
    and multi-turn rollouts merge by themselves.
``shared_prompt: true``
    The loss forward runs each distinct prompt of a micro-batch once for all its completions
    (``shared_prompt.py``): same log-probs (tested against TRL's), far less compute when a
    micro-batch holds several completions of a prompt. Workbook GRPO 250 -> 185 s together with
    the shared-prefix decoding (``benchmarks/results/workbook_profile.md``, ``after``).
``group_batches: true``
    Each rollout round shuffled by whole groups instead of rows (``group_batches.py``), so that
    a micro-batch holds whole groups and ``shared_prompt`` shares their prompts on a GPU too
    (where it runs all of a chunk's prompts in one padded forward). Only which completions share
    an optimizer step changes.
``bf16_lora_inputs: true``
    bf16 runs: the loss forwards' LoRA branches read the bf16 activations, not a float32 copy
    that autocast casts back (``lora_inputs.py``, PEFT's ``disable_input_dtype_casting``): the
    same numbers; copies were 23% of an H200 GRPO step's GPU time (``step_profile.py``).
``fused_lora: true``
    Each PEFT LoRA projection one autograd node (``fused_lora.py``): ``x W^T + s (x A^T) B^T`` in
    three matmuls forward and five backward instead of three linear layers, a multiply, an add and
    casts; same numbers up to float rounding (tested against PEFT). A third fewer aten ops per
    forward and backward (``benchmarks/results/lora_host_cost.md``), yet on an H100 a mid-round
    step of the embedded model stayed at 0.28 s (``grpo_throughput.md``, run 5). Off by default.
``round_logprob_rows: <rows>``
    TRL's no-grad log-prob forward over a rollout round in chunks of this many rows instead of
    ``per_device_train_batch_size`` (``round_logprobs.py``): without gradients far larger chunks
    fit, and on a GPU each chunk's launches cost the same host time whatever its size. With 512
    (one chunk a round) a round's first step fell from 2.7-3.3 to 2.3-2.7 s on an H100 (run 5).
    Under ``shared_prompt`` chunks hold whole groups, shortest prompts first, so a smaller chunk
    pads less (128 rows: 1.20x the real prompt tokens against 1.96x for one chunk of 512,
    ``benchmarks/results/round_logprob_padding.md``); GPU seconds not yet measured.
``compile_layers: true`` (GPU, vLLM rollouts)
    The trainer's decoder layers compiled once for all layers (``compiled_layers.py``): fused
    kernels where the H200 step is bound by launching ~5,000 small ones. Same numbers (tested);
    measured slower on an H100: 94.5 against 112.4 completions/s eager in the same run
    (``benchmarks/results/grpo_throughput.md``, run 3).
``cuda_graphs: true`` (GPU, with ``shared_prompt``)
    ``shared_prompt``'s two backbone passes replayed from CUDA graphs (``cuda_graphs.py``):
    recorded per shape (prompt widths in steps of 64 tokens, completions of 32) with
    ``torch.cuda.make_graphed_callables`` for the loss forward and backward and one captured
    forward for the round's no-grad pass; eager's kernels, so the same numbers; TRL's fused head
    eager on the replayed hidden states. For a step bound by the host's launches, not the GPU.
    Replays give eager's log-probs exactly on the same shapes, gradients to fp32 rounding (run 9,
    ``benchmarks/results/cuda_graphs_check.md``). Runs 8-9 (H100): replayed mid-round steps
    0.18-0.21 s against 0.33-0.53 s eager, a round with no new shape 3.3-3.5 s against 5.2-6.4 s,
    but recordings of new shapes (each waits for the overlapped generation) in the timed rounds
    made 24 steps slower (75.2 against 88.1/s in run 9). So every width bucket of the training
    prompts is now recorded at each mode's first recording (``planned_widths``; not yet run on a
    GPU). Off by default; not a recipe yet.
``sampler_logps: true`` (vLLM rollouts; a change of algorithm)
    The round's old log-probs are the ones vLLM sampled with, not TRL's no-grad forward over the
    round (``sampler_logps.py``; ~0.9-1.0 s of a round of 512 on an H100, run 6): PPO's ratio is
    taken against the sampling policy, TRL's importance-sampling correction becomes exactly 1. A
    round whose log-probs do not fit its completions runs the forward, counted. With the
    engine-process overlap on an H100: 88.4 against 99.3/s for its twin in run 8 (one warm-up
    round), 103.5 and 90.2 against 87.8-88.5/s in run 9 (three), 111.5 and 103.3/s with CUDA MPS;
    calls of one path spread by up to 13%. Off by default.
``trim_padding: true``
    Every log-prob forward of the trainer cut to its rows' own length (``trim_padding.py``):
    rows in length order, each chunk without the round's common left and right padding, and
    (dapo, grpo, dr_grpo) each optimizer step's rows sorted by length before TRL splits them
    into micro-batches. Same log-probs and gradient up to float rounding (tested against
    TRL's). Issue 39's rounds: 1.4x fewer token positions in the trainer's forwards, padding
    ~40% -> ~13% (``benchmarks/results/trim_padding_tokens.md``, counted on CPU); GPU seconds not
    yet measured (the ``*-trim`` variants of ``benchmarks/gpu/rl_multi_turn_gpu.py``).
``skip_zero_advantage: true`` (the default)
    A micro-batch whose advantages are all zero skips its forward and backward with exact zero
    gradients (``zero_advantage.py``): notebook 06 175 -> 113 s, 4.03 -> 1.79 GiB
    (``workbook_profile.md``, ``81cf914``). Also the multi-turn run's one hook.
``loss_mmap_threshold: <bytes>`` (CPU, glibc)
    While the loss runs, blocks of at least this size get their own mapping and go back to the
    OS when freed (``loss_memory.py``): 4 GRPO steps peaked at 3.42 instead of 3.97 GiB for 7%
    more step time at 1 MiB (``benchmarks/results/grpo_memory.md``). ``undo`` resets it.
``priming_mmap_threshold: <bytes>`` (CPU, glibc)
    The same while priming trains (``memory.mapped_blocks``, used by ``train/priming.py``):
    peak ~3.7 -> ~3.0 GiB for ~6% more time at 2 MiB (``benchmarks/results/priming_memory.md``).
``grpo.vllm`` (not in ``fast:``; ``vllm_engine.py``)
    With vLLM generating (TRL's engine, or Unsloth's ``fast_inference``) ``merged_generation``
    steps aside (``install`` says so in its list) and ``rollouts: library`` is refused by the
    config's validation: neither would ever run. On an H200 the embedded model's GRPO ran 27.9 ->
    73.8 completions/s with colocate, one micro-batch of 64, ``detokenize: false`` and
    ``bf16_lora_inputs``, ``group_batches``, ``shared_prompt`` (``benchmarks/results/grpo_throughput.md``).
``overlap_generation: true`` (GPU, vLLM colocate)
    The next rollout round generated by the colocated engine on a worker thread, on its own CUDA
    stream, while the trainer scores this round and takes its optimizer steps (``overlap.py``);
    each round one round staler, which TRL's importance-sampling correction reweights. The
    dataloader is read one round ahead; a round whose prompts were not prefetched is generated as
    TRL does. Measured slower on an H100 with the embedded model: 105.6 against 111.9 completions/s
    in the same run, the generation hidden but the round's scoring stretched by it (one interpreter
    lock for both threads; ``benchmarks/results/grpo_throughput.md``, run 4); with
    ``generation_process`` faster (run 6, below). Off by default.
``generation_process: true`` (GPU, vLLM colocate)
    TRL's colocated engine in a spawned process of its own on the same GPU (``engine_process.py``):
    TRL's ``LLM`` becomes a client over a pipe (prompt ids out, token ids and log-probs back), and
    TRL's in-process weight sync becomes copies into flat buffers the engine mapped once through
    CUDA IPC. With ``overlap_generation`` the next round is generated outside the trainer's
    interpreter. Measured on an H100 (run 6, ``grpo_throughput.md``): with the overlap 128.2
    against 107.0 completions/s without it in the same run (1.20x; 4.78x TRL's generate), the
    fastest row of the course's recipe; a round's first step 1.4-1.6 s instead of 2.6-3.1 s. Off by
    default.
``engine_core_process: true`` (GPU, with ``generation_process``)
    vLLM's engine core (scheduler, model steps) in a process of its own beneath the engine
    process (vLLM's multiprocessing, on there only), so that the engine process handles each
    step's outputs beside the next model steps. Measured no faster on an H100 (run 11,
    ``grpo_throughput.md``): 133.4 against 132.7/s in one call, 151.6 against 157.0/s in
    another; the overlapped generation is slow for sharing the GPU, not for its host-side work.
    Off by default.
``engine_sm_percent: <percent>`` (GPU, with ``generation_process``, under CUDA MPS)
    The engine process may use at most this share of the SMs (``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``
    set in it before vLLM starts; the trainer's cap is the same variable in its own environment), so
    that the trainer's large kernels cannot take every SM from the engine's small decode steps, as
    they did under MPS without caps (run 12: 122.7 against 150.0/s without MPS). Does nothing
    without an MPS server. Run 13 (H100): 50/50 ran 153.9 against 162.8/s without MPS, the
    trainer slowed by its cap; an engine capped at 30% generated wrong tokens (its log-probs 7.7
    nats a token off the trainer's; ``sampler_logps`` refused them). 0 (no cap) by default.
``engine_prompt_groups: true`` (GPU, with ``generation_process``)
    Each group's G copies of a prompt, which TRL's colocated engine sends as G one-sample
    requests, sent to vLLM as one request of n = G samples (``engine_process.generate_in_groups``),
    handed back in the copies' order: the same sampling, the prompt taken in once per group.
    Run 13 found the engine's own round (2.87 s for 512 completions on an H100, alone) to bound
    an overlapped round. Run 14 (H100, with a 32,768-token budget per model step): vLLM's round
    no shorter (2.54-3.42 against 2.67-3.49 s); off by default.
``engine_processes: N`` (GPU, with ``generation_process`` and ``grpo.vllm.kv_cache_gib``)
    N engine processes on the one GPU (``engine_process.EnginePool``), each generating a
    contiguous share of the round's groups at the same time, each with its own seed, all mapping
    the same weight buffers. vLLM's round for a small model is bound by its host-side work per
    decode step, which N engines share. Run 14 (H100): N = 2 cut vLLM's round from 2.67-3.49 to
    1.57-1.92 s, 149.3 against 141.0 completions/s in the same call; the trainer, slowed by the
    engines' time slices on the GPU, then bounds the round. 1 by default.
``prompt_token_cache: true``
    Each distinct prompt rendered and tokenised once per run (``prompt_tokens.py``): TRL's own
    ``_tokenize_prompts`` for the prompts not seen before, the ids kept under the prompt's text.
    TRL tokenises every row of every round (64 prompts x 8 rows a round of 512), and the overlap
    the next round again: ~0.2 s of a round's first step in run 12's profile. Same ids (tested
    against TRL's); a round of 512 rows 123 -> 3-20 ms on the CPU
    (``benchmarks/results/prompt_token_cache.md``). On an H100 its one call (140.1/s, one slow
    round, run 13) showed no gain beside the engine's bound. Off by default.
``generation_times: true``
    ``generation_times.rank<r>.jsonl`` per process, seconds per rollout round
    (``gen_timing.py``): where a multi-GPU step waits (``benchmarks/results/multi_gpu.md``).

Always on, no option (they change no result, only time):
``decode.py`` (the CPU key/value-cache decoder: a prompt's keys/values stored once for its k
samples, an in-place growing cache, multi-turn transcripts re-using their prefix; validation
248/131/180 -> 142/96/94 s, ``workbook_profile.md``), ``weight_major_linear.py`` (off Intel: a
decode step's linear layers as ``W @ x.T``, 1.4-1.8x a step on an AMD EPYC,
``benchmarks/results/cpu_floor_epyc.md``), ``cpu_logprob.py`` (TRL's log-prob kernel without
Triton), ``memory.trim_c_heap`` (after each stage), ``profiling.stage`` (a no-op unless
``$TOOLRL_PROFILE_LOG`` is set), ``slots.py`` (the GPU slot engine of the BFCL multi-turn
evaluation). ``trl_compat.py`` names every TRL internal the hooks touch, checked at start.

Always on with TRL's vLLM engine and the peft backend, a fix rather than a speed-up:
``weight_sync.py`` hands vLLM each adapted weight as a fresh ``W + sBA`` copy instead of TRL's
merge into the model and unmerge, a bf16 round trip that walks the frozen base weights a little
every sync (``benchmarks/results/weight_sync_drift.md``); ``train/trainer.py`` installs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class Installed(list):
    """What ``install`` changed, one human-readable line each (a list of str), plus what the
    run records or undoes: ``merged_check`` (the unsloth merged-path figures, for run_info) and
    ``loss_mmap`` (whether ``undo`` must reset the allocator)."""

    merged_check: dict[str, Any] | None = None
    loss_mmap: bool = False
    graphs: Any = None
    sampler: Any = None
    prompt_tokens: Any = None
    engine: Any = None


def install(
    trainer: Any, config: Any, *, device: str = "cpu", backend: str = "peft", tokenizer: Any = None,
    run_root: str | Path | None = None, rank: int = 0, multi_turn: bool = False,
) -> Installed:
    """Hook ``trainer`` (a TRL ``GRPOTrainer``) as ``config.fast`` asks; returns the changes.

    ``multi_turn=True``: the multi-turn run, whose own rollout function already handles
    merged weights: only the zero-advantage skip applies. ``tokenizer`` is needed for the
    merged-path check under unsloth, ``run_root`` for ``generation_times`` (every rank writes
    its own file, ``rank``)."""
    f = config.fast
    done = Installed()
    vllm = config.grpo.vllm.on
    if not multi_turn and f.merged_generation and f.rollouts == "trl" and vllm:
        done.append(f"fast.merged_generation skipped: vLLM generates the rollouts (grpo.vllm.mode: "
                    f"{config.grpo.vllm.mode}), so TRL never calls the generate path it hooks")
    elif not multi_turn and f.merged_generation and f.rollouts == "trl":  # library rollouts merge themselves
        from toolrl_lib.fast.merged_generation import generate_with_merged_lora, require_merged_path

        if backend == "unsloth":  # its patched LoRA layers: check the merged path, do not trust it
            done.merged_check = require_merged_path(trainer.accelerator.unwrap_model(trainer.model), tokenizer)
            done.append(f"merged rollouts under unsloth checked: {done.merged_check}")
        method = generate_with_merged_lora(trainer)
        done.append(f"GRPOTrainer.{method}: rollouts through merged LoRA weights (fast.merged_generation)")
    if not multi_turn and f.shared_prompt:
        from toolrl_lib.fast.shared_prompt import install as install_shared_prompt

        graphs = None
        if f.cuda_graphs and device == "cuda":
            from toolrl_lib.fast.cuda_graphs import GraphedBackbone, dataset_widths
            from toolrl_lib.fast.overlap import wait_for_worker

            graphs = GraphedBackbone(trainer.model, before_recording=lambda: wait_for_worker(trainer),
                                     widths=dataset_widths(trainer))
        method = install_shared_prompt(trainer, graphs)
        done.append(f"GRPOTrainer.{method}: each prompt's forward shared by its completions (fast.shared_prompt)"
                    + (f", its backbone passes replayed from CUDA graphs (fast.cuda_graphs; {len(graphs.widths)} "
                       f"prompt widths recorded at each mode's first recording)" if graphs else ""))
        done.graphs = graphs
    if not multi_turn and f.group_batches:
        from toolrl_lib.fast.group_batches import install as install_group_batches

        method = install_group_batches(trainer)
        done.append(f"GRPOTrainer.{method}: each round shuffled by whole groups of "
                    f"{trainer.num_generations} (fast.group_batches)")
    if not multi_turn and f.bf16_lora_inputs:
        from toolrl_lib.fast.lora_inputs import install as install_lora_inputs

        method = install_lora_inputs(trainer)
        done.append(f"GRPOTrainer.{method}: LoRA branches read bf16 activations, no float32 copy "
                    f"(fast.bf16_lora_inputs)")
    if f.fused_lora:
        from toolrl_lib.fast.fused_lora import install as install_fused_lora

        count = install_fused_lora(trainer)
        done.append(f"{count} LoRA projections: one autograd node each, three matmuls forward (fast.fused_lora)")
    if f.trim_padding:  # before compile_layers: each cut chunk then runs inside its hook
        from toolrl_lib.fast.trim_padding import install as install_trim_padding

        hooked = install_trim_padding(trainer, config.grpo.loss_type, sort=not (f.group_batches and not multi_turn))
        done.append("GRPOTrainer." + " and ".join(hooked) + ": log-prob forwards cut to each chunk's own length"
                    + (", each optimizer step's rows in length order" if len(hooked) > 1 else "")
                    + " (fast.trim_padding)")
    if f.round_logprob_rows:  # outside shared_prompt and trim_padding, which read the chunk size it sets
        from toolrl_lib.fast.round_logprobs import install as install_round_logprobs

        method = install_round_logprobs(trainer, f.round_logprob_rows)
        done.append(f"GRPOTrainer.{method}: the round's no-grad log-prob forward in chunks of "
                    f"{f.round_logprob_rows} rows (fast.round_logprob_rows)")
    if f.compile_layers:  # last: its hook is the outermost, so every log-prob forward traces inside it
        from toolrl_lib.fast.compiled_layers import install as install_compiled_layers

        method = install_compiled_layers(trainer)
        done.append(f"GRPOTrainer.{method}: decoder layers compiled once for all layers (fast.compile_layers)")
    if f.skip_zero_advantage:
        from toolrl_lib.fast.zero_advantage import install as skip_zero_advantage_batches

        method = skip_zero_advantage_batches(trainer)
        if method is not None:  # not where the loss has a term beyond the advantage
            done.append(f"GRPOTrainer.{method}: all-zero-advantage micro-batches skip forward and backward "
                        f"(fast.skip_zero_advantage)")
    if not multi_turn and f.loss_mmap_threshold and device == "cpu":  # a lower peak RSS for a little time
        from toolrl_lib.fast import loss_memory

        done.loss_mmap = loss_memory.install(trainer, f.loss_mmap_threshold)
        if done.loss_mmap:
            done.append(f"GRPOTrainer.{loss_memory.ROLLOUT_PHASE}: blocks >= {f.loss_mmap_threshold} bytes "
                        f"mapped on their own during the loss (fast.loss_mmap_threshold)")
    if not multi_turn and f.prompt_token_cache:
        from toolrl_lib.fast.prompt_tokens import install as install_prompt_tokens

        done.prompt_tokens = install_prompt_tokens(trainer)
        done.append("GRPOTrainer._tokenize_prompts: each distinct prompt tokenised once, its ids kept "
                    "(fast.prompt_token_cache)")
    if f.generation_process:
        from toolrl_lib.fast.engine_process import install as install_engine_process

        done.engine = install_engine_process(trainer)
        done.append("VLLMGeneration.sync_weights: TRL's vLLM engine in a process of its own, weights in through "
                    "CUDA IPC buffers (fast.generation_process)")
    if f.overlap_generation:  # before generation_times: its timer then sees the wait, not the worker
        from toolrl_lib.fast.overlap import install as install_overlap

        install_overlap(trainer)
        done.append("GRPOTrainer.get_batch_samples, _prepare_inputs and _generate_single_turn: the next round "
                    "generated by vLLM on a worker thread while this one trains, one round staler "
                    "(fast.overlap_generation)")
    if not multi_turn and f.sampler_logps:  # after overlap: its rollout hook must see the round handed to TRL
        from toolrl_lib.fast.sampler_logps import install as install_sampler_logps

        done.sampler = install_sampler_logps(trainer)
        done.append(f"GRPOTrainer.{done.sampler.method} and _get_per_token_logps_and_entropies: the round's old "
                    f"log-probs from vLLM's sampler, no forward over the round (fast.sampler_logps)")
    if not multi_turn and f.generation_times:
        from toolrl_lib.fast.gen_timing import record_generation_times, timing_file

        path = timing_file(run_root if run_root is not None else ".", rank)
        if record_generation_times(trainer, path, rank):
            done.append(f"GRPOTrainer rollouts timed into {path.name} (fast.generation_times)")
    return done


def undo(installed: Installed) -> None:
    """After training: reset what outlives the trainer (the allocator's mmap threshold)."""
    if installed.loss_mmap:
        from toolrl_lib.fast import loss_memory

        loss_memory.reset()


def rollout_func(config: Any) -> Any:
    """TRL's ``rollout_func`` for ``fast.rollouts: library`` (the library sampler), else None."""
    if config.fast.rollouts != "library":
        return None
    from toolrl_lib.fast.library_rollouts import library_rollout

    return library_rollout(merge_lora=config.fast.merged_generation)


def check_backend(config: Any, backend: str) -> None:
    """Fail early where the resolved backend cannot run a chosen option (``auto`` may pick
    unsloth only at run time, after the config was validated)."""
    if backend == "unsloth" and config.fast.overlap_generation:
        raise ValueError("fast.overlap_generation drives TRL's colocated engine, which the unsloth backend does "
                         "not build (backend 'auto' chose unsloth here); set backend: peft or turn it off")
    if backend == "unsloth" and config.fast.fused_lora:
        raise ValueError("fast.fused_lora replaces PEFT's LoRA forwards; the unsloth backend (backend 'auto' chose "
                         "it here) patches its own: set backend: peft or turn it off")
    if backend == "unsloth" and config.fast.generation_process:
        raise ValueError("fast.generation_process moves TRL's colocated engine, which the unsloth backend does not "
                         "build (backend 'auto' chose unsloth here); set backend: peft or turn it off")
    if backend == "unsloth" and config.fast.cuda_graphs:
        raise ValueError("fast.cuda_graphs replays fast.shared_prompt's forward, which the unsloth backend (backend "
                         "'auto' chose it here) does not run: set backend: peft or turn it off")
    if backend == "unsloth" and config.fast.rollouts == "library":
        raise ValueError("fast.rollouts: library needs the peft backend (backend 'auto' chose "
                         "unsloth here); set backend: peft or fast.rollouts: trl")


__all__ = ["Installed", "check_backend", "install", "rollout_func", "undo"]

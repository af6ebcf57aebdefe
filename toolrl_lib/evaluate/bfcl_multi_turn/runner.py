"""Our inference loop for BFCL's multi-turn benchmark categories, step for step like BFCL's own.

(The multi-turn *training* episodes are ``toolrl_lib.envs``; this module only evaluates.)

BFCL's loop for local models (``base_handler.inference_multi_turn_prompting``), followed
here:

* the prompt holds the entry's function docs as BFCL builds them (``entry_functions``) and
  the conversation so far; held-out functions (``multi_turn_miss_func``) are revealed at
  their turn by BFCL's user message (the docs, then "I have updated some more functions
  you can choose from. What about now?"); the tool list itself stays as it was;
* per step the model replies; a reply with no decodable call ends the turn; otherwise
  every call is executed (``EnvPool``) and each result is fed back as a tool message;
* more than ``MAXIMUM_STEP_LIMIT`` (20) executed steps in a turn force-terminates the
  entry (BFCL then scores it ``multi_turn:force_terminated`` by its short turn list).

Differences, by design: replies are parsed by the model family's adapter (the same as
single-turn) and the calls are re-rendered canonically for the result file (see
``bfcl_multi_turn.results``); an entry whose prompt plus the step's token budget does not fit
the model's window is recorded as a BFCL inference error (``"Error during inference:
..."``, never a crash), where BFCL asks for ``window - prompt`` tokens and fails only when
the prompt alone does not fit. ``compact=True`` shortens the docs (``compact_docs``), a
documented deviation for small-window models.

All live episodes advance together: one ``complete`` call per step for all of them (cut
into chunks by ``plan_chunks``). How many are live: ``max_live`` episodes, and with
``max_live_tokens`` only as many as an engine's KV cache holds (BFCL's transcripts are ~7-8k
tokens each: 200 of them in float32 are ~70 GB of keys and values, so a smaller cache evicts
and pre-fills them again at every step). Finished entries are appended to
``generations/<category>.jsonl`` at once, so an interrupted run resumes per entry.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrl_lib.data.bfcl import MULTI_TURN, load_bfcl_entries
from toolrl_lib.data.example import Example
from toolrl_lib.evaluate import bfcl_results as results
from toolrl_lib.evaluate.bfcl_multi_turn.env import (
    EnvPool,
    compact_docs,
    entry_functions,
    held_out_message,
)
from toolrl_lib.evaluate.bfcl_multi_turn.results import canonical_step, sanitise_result_file

MAXIMUM_STEP_LIMIT = 20  # BFCL's per-turn limit (force-quit when the step count exceeds it)
MULTI_TURN_FORMAT = 1  # version of our multi-turn result-line format


@dataclass
class MultiTurnSettings:
    """How multi-turn generation runs (part of the resume cache's key)."""

    max_new_tokens: int = 128
    window: int | None = None  # context length in tokens (None: the model's own; 0: no check)
    compact: bool = False
    step_limit: int = MAXIMUM_STEP_LIMIT
    call_timeout: float = 10.0
    # Keep each episode's key/value cache between steps and pre-fill only what is new
    # (``multi_turn_decode``): None = on a CPU with the hf backend, else batched ``generate``.
    # Not part of the cache key: greedy tokens are the same either way.
    prefix_cache: bool | None = None
    # Keep every live episode's cache in a slot on the device and decode all of them together
    # (``multi_turn_slots``): None = on an accelerator with the hf backend (when prefix_cache is
    # None). Its memory is max_live x window x the model's key/value bytes per token.
    slots: bool | None = None
    # Only these entry ids (a demo subset, e.g. the smoke profile's shortest entry); None: all.
    # Not part of the cache key either: generations are kept per entry.
    entry_ids: tuple[str, ...] | None = None
    # Episodes in flight at once; a finished one is replaced from the queue at the next step
    # (continuous batching), so results are saved as they come and a killed run loses at most
    # this many. None: all at once.
    max_live: int | None = None
    # A queued episode joins only while the live episodes' contexts (each its latest prompt plus
    # ``max_new_tokens``) fit this many tokens: an engine whose KV cache cannot hold every live
    # transcript evicts some and pre-fills them again in full at every step. The first queued
    # episode always joins an empty set. "kv" = the engine's own capacity (``kv_tokens`` of the
    # loaded model: vLLM with a fixed KV cache; no limit where it is unknown); None: no limit.
    # Not part of the cache key: greedy replies do not depend on which episodes share a step.
    max_live_tokens: int | str | None = None

    def wanted(self, entry_id: Any) -> bool:
        return self.entry_ids is None or str(entry_id) in self.entry_ids

    def key(self, model: str, family: str) -> dict[str, Any]:
        return {"model": str(model), "family": family, "max_new_tokens": self.max_new_tokens,
                "window": self.window, "compact": self.compact, "step_limit": self.step_limit,
                "format": MULTI_TURN_FORMAT}  # fmt: skip


@dataclass
class Episode:
    """One entry in flight: its conversation, the step strings so far, and counters."""

    entry: dict[str, Any]
    category: str
    key: str
    tools: list[dict[str, Any]]
    held_out: dict[int, list[dict[str, Any]]]
    messages: list[dict[str, Any]] = field(default_factory=list)
    turn: int = 0
    steps_in_turn: int = 0
    result: list[list[str]] = field(default_factory=list)
    raw: list[list[str]] = field(default_factory=list)
    tool_results: list[list[list[str]]] = field(default_factory=list)
    calls: int = 0
    refused: int = 0
    valid_steps: int = 0
    steps: int = 0
    max_prompt_tokens: int = 0
    seconds: float = 0.0  # generation time, this episode's share of each batch (by prompt tokens)
    force_terminated: bool = False
    error: str | None = None
    done: bool = False

    def start_turn(self) -> None:
        """Append the current turn's user messages (BFCL's message on a held-out turn)."""
        messages = list(self.entry["question"][self.turn])
        if self.turn in self.held_out:
            messages = [{"role": "user", "content": held_out_message(self.held_out[self.turn])}]
        self.messages += [{"role": m["role"], "content": str(m.get("content", ""))} for m in messages]
        self.result.append([])
        self.raw.append([])
        self.tool_results.append([])
        self.steps_in_turn = 0

    def end_turn(self) -> None:
        self.turn += 1
        if self.turn >= len(self.entry["question"]):
            self.done = True
        else:
            self.start_turn()

    def row(self) -> dict[str, Any]:
        """The result line: BFCL's ``result`` plus our own fields (BFCL ignores them)."""
        return {
            "id": self.entry["id"],
            "result": self.result if self.error is None else self.error,
            "raw": self.raw,
            "tool_results": self.tool_results,
            "n_calls": self.calls,
            "n_refused": self.refused,
            "steps": self.steps,
            "format_valid": self.steps > 0 and self.valid_steps == self.steps,
            "force_terminated": self.force_terminated,
            "inference_error": self.error,
            "max_prompt_tokens": self.max_prompt_tokens,
            "generate_seconds": round(self.seconds, 3),
        }


def new_episode(entry: dict[str, Any], category: str, pool: EnvPool, compact: bool) -> Episode:
    tools, held_out = entry_functions(entry)
    if compact:
        tools = compact_docs(tools)
        held_out = {turn: compact_docs(docs) for turn, docs in held_out.items()}
    key = f"infer::{entry['id']}"
    pool.open(key, entry)
    episode = Episode(entry, category, key, tools, held_out)
    episode.start_turn()
    return episode


def prompt_for(episode: Episode, adapter: Any, tokenizer: Any) -> str:
    example = Example(id=str(episode.entry["id"]), source="bfcl", messages=episode.messages,
                      tools=episode.tools, ground_truth=[], kind="multi_turn")  # fmt: skip
    return adapter.render_prompt(example, tokenizer)


def take_step(episode: Episode, text: str, adapter: Any, pool: EnvPool, step_limit: int) -> None:
    """Apply one model reply: execute its calls and feed results back, or end the turn."""
    parsed = adapter.parse(text)
    episode.steps += 1
    episode.valid_steps += bool(parsed.valid)
    episode.raw[-1].append(text)
    calls = list(parsed.calls)
    if not calls:  # nothing decodable: the turn is over (BFCL's rule)
        episode.result[-1].append("")
        episode.tool_results[-1].append([])
        episode.messages.append({"role": "assistant", "content": parsed.content or text})
        episode.end_turn()
        return
    outcomes = [pool.call(episode.key, call) for call in calls]
    episode.calls += len(outcomes)
    episode.refused += sum(not o.executed for o in outcomes)
    episode.result[-1].append(canonical_step(outcomes))
    episode.tool_results[-1].append([o.result for o in outcomes])
    episode.messages.append({"role": "assistant", "content": "", "tool_calls": [
        {"name": str(c.get("name")), "arguments": c.get("arguments") if isinstance(c.get("arguments"), dict) else {}}
        for c in calls]})  # fmt: skip
    episode.messages += [{"role": "tool", "content": o.result} for o in outcomes]
    episode.steps_in_turn += 1
    if episode.steps_in_turn > step_limit:
        episode.force_terminated = True
        episode.done = True


def over_window(tokens: int, settings: MultiTurnSettings) -> str | None:
    if not settings.window or tokens + settings.max_new_tokens <= settings.window:
        return None
    return (f"Error during inference: the prompt ({tokens} tokens) plus {settings.max_new_tokens} "
            f"new tokens does not fit the model's window of {settings.window} tokens")  # fmt: skip


def generate_multi_turn_pending(
    loaded: Any,
    out_dir: str | Path,
    categories: list[str],
    family: str,
    limit: int | None,
    settings: MultiTurnSettings,
    *,
    chunk: int = 64,
    max_batch_tokens: int | None = None,
    progress: bool = False,
) -> int:
    """Run every entry of ``categories`` not yet in its generations file; returns how many.

    ``loaded`` is a ``LoadedModel`` or a zero-argument callable returning one (called only
    when work is left)."""
    from toolrl_lib.prompts import get_adapter

    out = Path(out_dir)
    todo = []
    for category in categories:
        if category not in MULTI_TURN:
            raise ValueError(f"{category!r} is not a multi-turn category")
        done = results.done_ids(results.generations_file(out, category))
        todo += [(category, e) for e in load_bfcl_entries(category)[:limit]
                 if str(e["id"]) not in done and settings.wanted(e["id"])]
    if not todo:
        return 0
    if callable(loaded) and not hasattr(loaded, "complete"):
        loaded = loaded()
    tokenizer, adapter = loaded.tokenizer, get_adapter(family)
    slots = _slot_engine(loaded, settings, len(todo))
    cached = None if slots is not None else _prefix_cache(loaded, settings)
    max_live = slots.slots if slots is not None else settings.max_live
    budget = live_token_budget(settings, loaded)
    waiting: dict[str, Episode] = {}  # the queue's head, opened and measured, until it fits
    bar = _bar(len(todo), progress)
    with EnvPool(call_timeout=settings.call_timeout) as pool:
        queue = list(todo)
        live: list[Episode] = []
        while queue or live:
            room = len(queue) if max_live is None else max(0, max_live - len(live))
            if budget is None:
                live += [new_episode(entry, category, pool, settings.compact) for category, entry in queue[:room]]
                del queue[:room]
            else:
                admit_within(budget, live, queue, room, pool, settings, adapter, tokenizer, waiting)
            prompts = []
            rendered = [prompt_for(episode, adapter, tokenizer) for episode in live]
            encoded = tokenizer(rendered, add_special_tokens=False)["input_ids"] if rendered else []
            for episode, text, ids in zip(live, rendered, encoded, strict=True):
                episode.max_prompt_tokens = max(episode.max_prompt_tokens, len(ids))
                episode.error = over_window(len(ids), settings)
                if episode.error:
                    episode.done = True
                    if slots is not None:  # free its slot now: the step's decode then reads a view
                        slots.drop(episode.key)
                else:
                    prompts.append((len(ids), text, episode, ids))
            prompts.sort(key=lambda item: item[0])
            if slots is not None:  # every live episode in one call: batched prefill and decode
                spans = [(0, len(prompts))] if prompts else []
            elif cached is not None:
                spans = [(i, i + 1) for i in range(len(prompts))]
            else:
                spans = results.plan_chunks([p[0] for p in prompts], chunk, max_batch_tokens, settings.max_new_tokens)
            for start, stop in spans:
                part = prompts[start:stop]
                began = time.perf_counter()
                if slots is not None:
                    replies = slots.complete({p[2].key: p[3] for p in part})
                    texts = [replies[p[2].key] for p in part]
                elif cached is not None:
                    texts = [cached.complete_one(part[0][2].key, part[0][1], ids=part[0][3])]
                else:
                    texts = loaded.complete([p[1] for p in part])
                elapsed, total = time.perf_counter() - began, sum(p[0] for p in part)
                for (tokens, _, episode, _), reply in zip(part, texts, strict=True):
                    episode.seconds += elapsed * tokens / max(1, total)
                    take_step(episode, reply, adapter, pool, settings.step_limit)
            still = []
            for episode in live:
                if episode.done:
                    results.append_results(results.generations_file(out, episode.category), [episode.row()])
                    pool.close(episode.key)
                    for engine in (cached, slots):
                        if engine is not None:
                            engine.drop(episode.key)
                    if bar is not None:
                        bar.update(1)
                else:
                    still.append(episode)
            live = still
    if bar is not None:
        bar.close()
    return len(todo)


def live_token_budget(settings: MultiTurnSettings, loaded: Any) -> int | None:
    """The token budget of the live episodes' contexts (``MultiTurnSettings.max_live_tokens``), or None."""
    wanted = settings.max_live_tokens
    if wanted == "kv":
        return getattr(loaded, "kv_tokens", None)
    if wanted is not None and (isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1):
        raise ValueError(f"max_live_tokens={wanted!r}: expected a positive number of tokens, 'kv' or None")
    return wanted


def admit_within(budget: int, live: list[Episode], queue: list[tuple[str, dict[str, Any]]], room: int,
                 pool: EnvPool, settings: MultiTurnSettings, adapter: Any, tokenizer: Any,
                 waiting: dict[str, Episode]) -> None:
    """Move episodes from the head of ``queue`` to ``live`` (at most ``room``) while the live contexts,
    each its latest prompt plus the step budget, fit ``budget`` tokens; in queue order, so the same
    entries run together on every run. The first one always joins an empty ``live``. ``waiting``
    keeps the head episode that did not fit (opened once, measured once) for the next step."""
    used = sum(e.max_prompt_tokens + settings.max_new_tokens for e in live)
    while queue and room > 0:
        category, entry = queue[0]
        episode = waiting.pop(str(entry["id"]), None)
        if episode is None:
            episode = new_episode(entry, category, pool, settings.compact)
            prompt = prompt_for(episode, adapter, tokenizer)
            episode.max_prompt_tokens = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        if live and used + episode.max_prompt_tokens + settings.max_new_tokens > budget:
            waiting[str(entry["id"])] = episode
            return
        used += episode.max_prompt_tokens + settings.max_new_tokens
        live.append(episode)
        queue.pop(0)
        room -= 1


def _prefix_cache(loaded: Any, settings: MultiTurnSettings) -> Any:
    """A ``TranscriptCache`` over the loaded transformers model when ``settings`` asks for one
    (None: when the model runs on a CPU), else None (batched ``complete``)."""
    model = getattr(loaded, "model", None)
    wanted = settings.prefix_cache
    if wanted is None:
        wanted = model is not None and next(model.parameters()).device.type == "cpu"
    if not wanted:
        return None
    if model is None:
        raise ValueError("prefix_cache=True needs the hf backend (a transformers model)")
    from toolrl_lib.fast.decode import TranscriptCache

    return TranscriptCache(model, loaded.tokenizer, settings.max_new_tokens)


def _slot_engine(loaded: Any, settings: MultiTurnSettings, todo: int) -> Any:
    """The device-resident ``SlotEngine`` (``multi_turn_slots``) for a transformers model on an
    accelerator, unless ``settings.prefix_cache`` or ``settings.slots`` says otherwise; else None."""
    model = getattr(loaded, "model", None)
    wanted = settings.slots
    if wanted is None:
        wanted = (model is not None and settings.prefix_cache is None
                  and next(model.parameters()).device.type != "cpu")  # fmt: skip
    if not wanted:
        return None
    from toolrl_lib.fast.slots import SlotEngine, supports_slots

    if model is None or not supports_slots(model):
        if settings.slots:
            raise ValueError("slots=True needs the hf backend and a Llama-like decoder")
        return None
    window = settings.window or getattr(model.config, "max_position_embeddings", None) or 8192
    live = min(todo, settings.max_live or max(1, fitting_slots(model, window + 1)))
    return SlotEngine(model, loaded.tokenizer, settings.max_new_tokens, slots=live, capacity=window + 1)


def fitting_slots(model: Any, capacity: int, share: float = 0.5) -> int:
    """How many cache slots of ``capacity`` positions fit in ``share`` of the device's free
    memory (max_live None on an accelerator); CPU: 64."""
    import torch

    device = next(model.parameters()).device
    if device.type != "cuda":
        return 64
    from toolrl_lib.fast.slots import slot_bytes

    free, _ = torch.cuda.mem_get_info(device)
    return int(share * free // slot_bytes(model, capacity))


def check_multi_turn_settings(out: Path, settings: dict[str, Any], categories: list[str]) -> None:
    """Multi-turn generations are reused only under the same settings; otherwise their
    files are moved aside to ``generations.stale-mt-<n>/`` (kept) and generation restarts."""
    path = out / "generation_multi_turn.json"
    if path.is_file() and json.loads(path.read_text()) != settings:
        n = 1
        while (out / f"generations.stale-mt-{n}").exists():
            n += 1
        stale = out / f"generations.stale-mt-{n}"
        stale.mkdir(parents=True)
        for category in MULTI_TURN:
            source = results.generations_file(out, category)
            if source.is_file():
                source.rename(stale / source.name)
        print(f"multi-turn generation settings changed; old generations kept in {stale}")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2))


def write_multi_turn_results(out: Path, name: str, category: str, ids: list[str]) -> int:
    """The result file of ``category`` from its generations, every line sanitised."""
    rows = {str(r["id"]): r for r in results.read_results(results.generations_file(out, category))}
    missing = [i for i in ids if i not in rows]
    if missing:
        raise RuntimeError(f"{category}: {len(missing)} entries were not generated, e.g. {missing[0]}")
    path = results.result_file(out, name, category)
    results.write_results(path, (rows[i] for i in ids))
    with EnvPool() as pool:
        sanitise_result_file(path, category, pool)
    return len(ids)


def model_window(model: str) -> int | None:
    """The model's context length (``max_position_embeddings``), None when unknown."""
    from toolrl_lib.evaluate.backends import adapter_base
    from toolrl_lib.models import resolve_model

    base = adapter_base(model)
    path = Path(base or resolve_model(model))
    config = path / "config.json"
    if not config.is_file():
        try:
            from transformers import AutoConfig

            return getattr(AutoConfig.from_pretrained(str(path)), "max_position_embeddings", None)
        except (OSError, ValueError):
            return None
    value = json.loads(config.read_text()).get("max_position_embeddings")
    return int(value) if value else None


def _bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="bfcl multi-turn", unit="entry")


__all__ = ["MAXIMUM_STEP_LIMIT", "MultiTurnSettings", "generate_multi_turn_pending", "model_window"]

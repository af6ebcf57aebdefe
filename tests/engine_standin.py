"""A stand-in for vLLM's ``LLM`` inside the engine process of ``tests/test_engine_process.py``."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any


class StandInLLM:
    def __init__(self, seed: int = 0, fail: bool = False) -> None:
        if fail:
            raise ValueError("no engine today")
        self.seed = seed
        self.calls: list[tuple[int, int]] = []  # (requests, samples per request) of each generate call

    def generate(self, prompts: list[dict[str, Any]], sampling_params: dict[str, Any], use_tqdm: bool = False) -> list:
        n = sampling_params.get("n", 1)
        self.calls.append((len(prompts), n))
        out = []
        for prompt in prompts:
            ids = prompt["prompt_token_ids"]
            samples = []
            for k in range(n):  # sample k: its own tokens, so a request's samples differ
                tokens = [ids[-1] + 1 + 100 * k + i for i in range(sampling_params["max_tokens"])]
                logprobs = [{t: SimpleNamespace(logprob=-0.5, rank=1)} for t in tokens]
                samples.append(SimpleNamespace(token_ids=tokens, text="", finish_reason="length", logprobs=logprobs))
            out.append(SimpleNamespace(prompt_token_ids=ids, outputs=samples))
        return out

    def collective_rpc(self, method: str, args: tuple = ()) -> list[Any]:
        if method == "fail":
            raise RuntimeError("the stand-in refuses")
        if method == "fail_if_seed" and self.seed == args[0]:  # one engine of a pool fails, the others answer
            raise RuntimeError(f"the stand-in with seed {self.seed} refuses")
        if method == "environ":  # what the engine process set before building the engine
            return [os.environ.get(args[0])]
        if method == "calls":
            return [list(self.calls)]
        return [[self.seed, *args]]

    def reset_prefix_cache(self) -> str:
        return "reset"

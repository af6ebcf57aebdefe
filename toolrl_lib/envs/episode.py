"""One episode as an append-only token transcript: the model's own tokens plus injected ones.

The prompt is the first user turn rendered by the family's adapter (tools in the system
prompt). After that nothing is ever re-rendered or re-tokenised: each model step appends
exactly the tokens that were sampled (``env_mask`` 1), and whatever the environment says
back -- tool results, the next user turn, tools revealed later -- is rendered by the chat
template as a *continuation* and appended (``env_mask`` 0). So GRPO trains on the tokens
the policy actually produced, and never on text it did not write.

Turn rules (BFCL's, with our limits): a reply with calls is executed and its results fed
back; a reply without a call ends the turn; after ``step_limit`` steps with calls the turn
is cut (``forced``); the episode stops when the turns run out or the token budget
(``max_episode_tokens``) has no room for another step (``truncated``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from toolrl_lib.data.example import Example
from toolrl_lib.envs.base import Environment, Task
from toolrl_lib.envs.checker import check_episode, gold_states
from toolrl_lib.envs.safety import Limits, Session

SENTINEL = "@@toolrl-model-reply@@"


@dataclass
class EpisodeSettings:
    step_limit: int = 4  # steps with calls per user turn before the turn is cut
    max_new_tokens: int = 96  # tokens of one model step
    max_episode_tokens: int = 1024  # completion tokens (model + injected) of one episode
    max_calls_per_step: int = 4  # further calls of one reply are answered with an error
    limits: Limits = field(default_factory=Limits)


def encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def continuation(tokenizer: Any, adapter: Any, messages: list[dict[str, str]], ended: bool) -> str:
    """The template's text after an assistant reply, up to the next generation prompt.

    ``ended``: the reply already ends with the eos token (the sampled stop token); otherwise
    (a step cut by its token limit) the end-of-turn text is injected too."""
    base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
            {"role": "assistant", "content": SENTINEL}]
    text = tokenizer.apply_chat_template(base + messages, add_generation_prompt=True, tokenize=False)
    text += adapter.prompt_suffix(tokenizer, False)
    tail = text.split(SENTINEL, 1)[1]
    eos = str(tokenizer.eos_token)
    if not tail.startswith(eos):
        raise ValueError(f"the chat template does not close an assistant turn with the eos token "
                         f"{eos!r} (it writes {tail[:40]!r}); append-only transcripts need that")
    return tail[len(eos):] if ended else tail


class Episode:
    """A live episode: its session (fresh app state), token transcript and counters."""

    def __init__(self, env: Environment, task: Task, adapter: Any, tokenizer: Any,
                 settings: EpisodeSettings | None = None) -> None:
        from toolrl_lib.generation import stop_token_ids

        self.env, self.task, self.adapter, self.tokenizer = env, task, adapter, tokenizer
        self.settings = settings or EpisodeSettings()
        self.stops = set(stop_token_ids(tokenizer))
        self.session = Session(env, task, self.settings.limits)
        messages = [{"role": "system", "content": env.system_prompt()},
                    {"role": "user", "content": self.user_text(0)}]
        example = Example(id=task.id, source="env", messages=messages, kind="multi_turn",
                          tools=env.tool_schemas(self.session.offered), ground_truth=[])
        self.prompt_ids = encode(tokenizer, adapter.render_prompt(example, tokenizer))
        self.messages = list(messages)  # the conversation as the template would see it
        self.completion_ids: list[int] = []
        self.env_mask: list[int] = []
        # the sampler's log-prob of each completion token (NaN: not known, or injected by the
        # environment); TRL's vLLM importance-sampling correction reads the sampled ones
        self.logprobs: list[float] = []
        self.turn = self.steps_in_turn = self.steps = self.valid_steps = 0
        self.forced = self.calls = self.refused = 0
        self.done = self.truncated = False
        self.replies: list[list[str]] = [[]]
        self.executed: list[list[dict[str, Any]]] = [[]]
        self.states: list[dict[str, Any]] = []
        self.texts: list[str] = []  # the model's step texts, for transcripts
        self.refusals: list[str] = []  # what the environment answered each call it did not execute

    def user_text(self, number: int) -> str:
        turn = self.task.turns[number]
        if not turn.reveal:
            return turn.user
        lines = "\n".join(json.dumps({"type": "function", "function": t}, ensure_ascii=False)
                          for t in self.env.tool_schemas(turn.reveal))
        return f"New functions are available:\n<tools>\n{lines}\n</tools>\n{turn.user}"

    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def room(self) -> int:
        return self.settings.max_episode_tokens - len(self.completion_ids)

    def _append(self, ids: list[int], mask: int, logprobs: list[float] | None = None) -> None:
        self.completion_ids += ids
        self.env_mask += [mask] * len(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [math.nan] * len(ids)

    def feed(self, tokens: list[int], logprobs: list[float] | None = None) -> None:
        """Apply one model step: ``tokens`` exactly as sampled (stop token included), with the
        sampler's log-probs of them when it reports them."""
        if self.done:
            raise RuntimeError(f"{self.task.id}: the episode is over")
        if logprobs is not None and len(logprobs) != len(tokens):
            raise ValueError(f"{self.task.id}: {len(logprobs)} log-probs for {len(tokens)} tokens")
        self._append(list(tokens), 1, logprobs)
        ended = bool(tokens) and tokens[-1] in self.stops
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        self.texts.append(text)
        self.messages.append({"role": "assistant", "content": text})
        parsed = self.adapter.parse(text)
        self.steps += 1
        self.valid_steps += bool(parsed.valid)
        if not parsed.calls:
            self.replies[self.turn].append(parsed.content or text)
            self._next_turn([], ended)
            return
        limit = self.settings.max_calls_per_step
        results = []
        for request in parsed.calls[:limit]:
            outcome = self.session.call(request)
            self.calls += 1
            self.refused += not outcome.executed
            if outcome.executed:
                self.executed[self.turn].append({"name": outcome.name, "arguments": outcome.arguments})
            else:
                self.refusals.append(str(outcome.result))
            results.append(outcome.result)
        results += [f"Error: at most {limit} calls per step"] * (len(parsed.calls) - limit)
        messages = [self.adapter.tool_result_message(r) for r in results]
        self.steps_in_turn += 1
        if self.steps_in_turn >= self.settings.step_limit:
            self.forced += 1
            self._next_turn(messages, ended)
        else:
            self._inject(messages, ended)

    def _next_turn(self, pending: list[dict[str, str]], ended: bool) -> None:
        self.states.append(self.session.state())
        self.turn += 1
        self.steps_in_turn = 0
        if self.turn >= len(self.task.turns):
            self.done = True
            return
        self.session.reveal(self.task.turns[self.turn].reveal)
        self.replies.append([])
        self.executed.append([])
        self._inject(pending + [{"role": "user", "content": self.user_text(self.turn)}], ended)

    def _inject(self, messages: list[dict[str, str]], ended: bool) -> None:
        self.messages += messages
        self._append(encode(self.tokenizer, continuation(self.tokenizer, self.adapter, messages, ended)), 0)
        if self.room() < self.settings.max_new_tokens:
            self.truncated = self.done = True

    def result(self, goal: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The outcome the rewards read: the checker's verdict plus counters."""
        check = check_episode(self.env, self.task, self.states, self.replies, self.executed,
                              goal if goal is not None else gold_states(self.env, self.task))
        return {
            "task_id": self.task.id, "env": self.task.env, "kind": self.task.kind,
            "apps": list(self.task.apps or [self.task.env]), **check.to_dict(),
            "steps": self.steps, "valid_steps": self.valid_steps, "forced": self.forced,
            "truncated": self.truncated, "calls": self.calls, "refused": self.refused,
            "model_tokens": sum(self.env_mask), "injected_tokens": len(self.env_mask) - sum(self.env_mask),
        }

    def transcript(self, max_chars: int = 240) -> dict[str, list[str]]:
        """The model's step texts and the environment's refusals, each cut to ``max_chars``: what an
        evaluation row keeps so that a failure can be read afterwards (which call, which error)."""
        return {"texts": [t[:max_chars] for t in self.texts], "refusals": [r[:max_chars] for r in self.refusals]}


def gold_replies(task: Task, adapter: Any) -> list[str]:
    """The gold assistant step texts of a task, in order (calls in the family's format)."""
    return [adapter.render_completion(step.calls, content=step.text)
            for turn in task.turns for step in turn.steps]


def play_gold(episode: Episode) -> Episode:
    """Feed the gold steps as if the model had written them (each closed by the eos token)."""
    eos = episode.tokenizer.eos_token_id
    for text in gold_replies(episode.task, episode.adapter):
        if episode.done:
            break
        episode.feed(encode(episode.tokenizer, text) + [eos])
    return episode

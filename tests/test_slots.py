"""The slot engine (the GPU multi-turn decoder) gives generate()'s greedy tokens, batched, while
pre-filling only what is new, and keeps each episode's cache apart from the others'."""

import pytest

from toolrl_lib.fast.slots import SlotEngine, supports_slots
from toolrl_lib.generation import generate

START = ("<|im_start|>system\nYou are a helper with tools.<|im_end|>\n"
         "<|im_start|>user\nHi there, {ask}<|im_end|>\n<|im_start|>assistant\n")
ASKS = ["list files", "make a folder called temp", "what is 2+2?", "go"]


def ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def reference(model, tokenizer, text, n):
    return generate(model, tokenizer, [text], max_new_tokens=n)[0][0]


def test_multi_turn_slots_match_generate_over_steps(lively):
    model, tokenizer = lively
    assert supports_slots(model)
    engine = SlotEngine(model, tokenizer, max_new_tokens=8, slots=6, capacity=1024, prefill_tokens=64)
    talks = {f"e{i}": START.format(ask=a) for i, a in enumerate(ASKS)}
    for step in range(3):
        replies = engine.complete({k: ids(tokenizer, t) for k, t in talks.items()})
        for key, text in talks.items():
            assert replies[key] == reference(model, tokenizer, text, 8), (step, key)
        for i, key in enumerate(talks):  # tool results of different lengths per episode
            talks[key] += (f"{replies[key]}<|im_end|>\n<|im_start|>user\nresult {step} "
                           f"{'x' * (7 * i + step)}<|im_end|>\n<|im_start|>assistant\n")
    total = sum(len(ids(tokenizer, t)) for t in talks.values())
    assert engine.reused_tokens > 0 and engine.prefilled_tokens < total
    assert engine.forwards < 3 * (len(talks) + 8)  # prefills batched, one decode forward per token


def test_multi_turn_slots_subsets_departures_and_freed_slots(lively):
    model, tokenizer = lively
    engine = SlotEngine(model, tokenizer, max_new_tokens=6, slots=3, capacity=512)
    a, b, c = (START.format(ask=x) for x in ASKS[:3])
    engine.complete({"a": ids(tokenizer, a), "b": ids(tokenizer, b), "c": ids(tokenizer, c)})
    engine.drop("a")  # a freed slot in the middle: decoding runs over it as padding
    engine.complete({"b": ids(tokenizer, b + "more"), "c": ids(tokenizer, c + "more")})
    # only one of two live keys (the other's cache must survive untouched), then a departure
    assert engine.complete({"b": ids(tokenizer, b + "more!")})["b"] == reference(model, tokenizer, b + "more!", 6)
    changed = c.replace("what is", "tell me")
    assert engine.complete({"c": ids(tokenizer, changed)})["c"] == reference(model, tokenizer, changed, 6)
    assert engine.complete({"d": ids(tokenizer, a)})["d"] == reference(model, tokenizer, a, 6)
    with pytest.raises(RuntimeError, match="slots"):
        engine.complete({"e": ids(tokenizer, a)})
    long = b + "more!" + "y" * 600  # beyond the capacity: the slots grow, the cached part is kept
    assert engine.complete({"b": ids(tokenizer, long)})["b"] == reference(model, tokenizer, long, 6)
    assert engine.capacity >= len(ids(tokenizer, long)) + 6 and engine.reused_tokens > 0


def test_multi_turn_slot_bytes(lively):
    from toolrl_lib.fast.slots import slot_bytes

    model, _ = lively  # 2 layers x 2 kv heads x head dim 8, float32: keys and values
    assert slot_bytes(model, 64) == 2 * 2 * 2 * 8 * 64 * 4

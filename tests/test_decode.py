"""The prefix-cached greedy decoder gives generate()'s tokens while pre-filling only what is new."""


from toolrl_lib.fast.decode import TranscriptCache, cache_bytes, common_prefix
from toolrl_lib.generation import generate

START = ("<|im_start|>system\nYou are a helper with tools.<|im_end|>\n"
         "<|im_start|>user\nHi there, list files<|im_end|>\n<|im_start|>assistant\n")


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2 and common_prefix([], [1]) == 0


def test_steps_match_generate_and_reuse_the_conversation(lively):
    model, tokenizer = lively
    cached = TranscriptCache(model, tokenizer, max_new_tokens=8)
    conversation, replies = START, set()
    for step in range(3):
        reply = cached.complete_one("episode", conversation)
        assert reply == generate(model, tokenizer, [conversation], max_new_tokens=8)[0][0]
        replies.add(reply)
        conversation += f"{reply}<|im_end|>\n<|im_start|>user\nresult {step}<|im_end|>\n<|im_start|>assistant\n"
    total = len(tokenizer(conversation, add_special_tokens=False)["input_ids"])
    assert cached.reused_tokens > 0 and cached.prefilled_tokens < total  # later steps pre-fill the new part
    # a prompt that departs early re-uses only the common part, and still matches
    changed = START.replace("list files", "make a folder")
    assert cached.complete_one("episode", changed) == generate(model, tokenizer, [changed], max_new_tokens=8)[0][0]


def test_caches_are_dropped_beyond_the_memory_budget(lively):
    model, tokenizer = lively
    cached = TranscriptCache(model, tokenizer, max_new_tokens=2, max_cache_bytes=1)
    cached.complete({"a": START, "b": START + "x"})
    assert list(cached.entries) == ["b"] and cache_bytes(cached.entries["b"][1]) > 0
    cached.drop("b")
    assert not cached.entries

"""generate(): left padding, stop at eos, k samples, reproducible seeds (tiny random model)."""

import pytest

from toolrl_lib.generation import batches, generate, prompts_per_batch
from toolrl_lib.models import make_tiny_model

PROMPTS = ["hi", "a much longer prompt than the first one", "mid-size prompt"]


@pytest.fixture(scope="module")
def tiny():
    return make_tiny_model(seed=0)


def test_batches_and_prompts_per_batch():
    assert [list(b) for b in batches([1, 2, 3, 4, 5], 2)] == [[1, 2], [3, 4], [5]]
    assert prompts_per_batch(16, 4) == 4
    assert prompts_per_batch(3, 8) == 1
    with pytest.raises(ValueError):
        list(batches([1], 0))


def test_greedy_shape_and_batch_independence(tiny):
    model, tok = tiny
    together = generate(model, tok, PROMPTS, max_new_tokens=6, batch_size=8)
    alone = [generate(model, tok, [p], max_new_tokens=6)[0] for p in PROMPTS]
    assert len(together) == 3 and all(len(c) == 1 for c in together)
    # Left padding must not change what a prompt continues into.
    assert together == alone
    assert generate(model, tok, PROMPTS, max_new_tokens=6, batch_size=1) == together


def test_completion_excludes_prompt(tiny):
    model, tok = tiny
    out = generate(model, tok, ["zzzz"], max_new_tokens=4)[0][0]
    assert len(tok(out, add_special_tokens=False)["input_ids"]) <= 4


def test_stops_at_eos(tiny):
    model, tok = tiny
    first = generate(model, tok, ["hello"], max_new_tokens=1)[0][0]
    assert first, "the tiny model should emit a visible first token"
    tok2 = make_tiny_model(seed=0)[1]
    tok2.eos_token = first  # the token greedy decoding emits first now ends the turn
    out = generate(model, tok2, ["hello"], max_new_tokens=8)[0][0]
    # Generation stops right after the eos token (a normal token here, so decoding keeps it).
    assert out == first
    assert generate(model, tok, ["hello"], max_new_tokens=8)[0][0] != first


def test_sampling_k_and_seed(tiny):
    model, tok = tiny
    kwargs = dict(max_new_tokens=5, do_sample=True, num_return_sequences=3, seed=7, batch_size=6)
    a = generate(model, tok, PROMPTS[:2], **kwargs)
    b = generate(model, tok, PROMPTS[:2], **kwargs)
    assert a == b
    assert [len(x) for x in a] == [3, 3]
    c = generate(model, tok, PROMPTS[:2], **{**kwargs, "seed": 8})
    assert c != a


def test_bad_arguments(tiny):
    model, tok = tiny
    assert generate(model, tok, []) == []
    with pytest.raises(ValueError):
        generate(model, tok, ["x"], num_return_sequences=2)  # greedy k>1 is pointless
    assert tok.padding_side == "left"

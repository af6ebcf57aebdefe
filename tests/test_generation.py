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


def test_greedy_matches_hf_generate(tiny):
    """Our decoding loop (length groups, one prefill, in-place cache) = HF ``generate``, greedy."""
    from toolrl_lib.generation import stop_token_ids

    model, tok = tiny
    prompts = [*PROMPTS, "x" * 40, "yy"]
    ours = generate(model, tok, prompts, max_new_tokens=12, batch_size=3)
    for prompt, got in zip(prompts, ours, strict=True):
        enc = tok([prompt], return_tensors="pt", add_special_tokens=False)
        ref = model.generate(**enc, max_new_tokens=12, do_sample=False, top_k=None, top_p=None,
                             temperature=None, eos_token_id=stop_token_ids(tok),
                             pad_token_id=tok.pad_token_id)
        assert got == [tok.decode(ref[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)]


def test_rows_that_stop_early_leave_the_batch_without_changing_the_others(tiny):
    model, tok = tiny
    prompts = [*PROMPTS, "x" * 40, "yy", "hello"]
    tok2 = make_tiny_model(seed=0)[1]
    tok2.eos_token = generate(model, tok, ["hello"], max_new_tokens=1)[0][0]  # "hello" stops at once
    together = generate(model, tok2, prompts, max_new_tokens=10, batch_size=8)
    alone = [generate(model, tok2, [p], max_new_tokens=10)[0] for p in prompts]
    assert together == alone
    assert together[-1] == [tok2.eos_token]


def test_sampler_rules():
    import torch

    from toolrl_lib.generation import Sampler

    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    assert Sampler(False, 1.0, 50, 1.0)(logits).tolist() == [1]
    torch.manual_seed(0)
    assert {Sampler(True, 1.0, 1, 1.0)(logits).item() for _ in range(20)} == {1}  # top-k 1
    assert {Sampler(True, 1.0, 0, 0.01)(logits).item() for _ in range(20)} == {1}  # top-p tiny
    drawn = {Sampler(True, 1.0, 2, 1.0)(logits).item() for _ in range(200)}
    assert drawn == {1, 3}  # top-k 2 keeps the two largest logits only
    with pytest.raises(ValueError):
        Sampler(True, 0.0, 50, 1.0)


def test_cpu_attention_without_kv_copy_gives_the_same_logits(tiny):
    import torch

    from toolrl_lib.models import GQA_ATTENTION, inference_attention, make_tiny_model

    model = make_tiny_model(seed=1)[0]  # 4 query heads, 2 key/value heads
    ids = torch.randint(5, 200, (2, 9))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0
    reference = model(input_ids=ids, attention_mask=mask).logits
    with inference_attention(model):
        assert model.config._attn_implementation == GQA_ATTENTION
        fast = model(input_ids=ids, attention_mask=mask).logits
    assert model.config._attn_implementation == "sdpa"
    assert torch.allclose(reference[:, 4:], fast[:, 4:], atol=1e-5)
    assert torch.allclose(reference[1], fast[1], atol=1e-5)


def test_shared_prefix_decoding_matches_the_padded_batch():
    """The CPU decoder (each prompt prefilled alone, its keys/values shared by its k samples,
    finished rows and prompts leaving the batch) samples what the padded batch samples."""
    import torch

    from toolrl_lib.fast.decode import shared_prefix_applies
    from toolrl_lib.generation import Sampler, decode_padded, decode_shared

    model, tok = make_tiny_model(seed=1)  # grouped-query attention: 4 query, 2 key/value heads
    model.eval()
    assert shared_prefix_applies(model)
    prompts = [tok(p, add_special_tokens=False)["input_ids"] for p in [*PROMPTS, "x" * 30]]
    stop = generate(model, tok, ["hello"], max_new_tokens=1)[0][0]
    stops = [tok.convert_tokens_to_ids(stop)] if stop in tok.get_vocab() else [tok.eos_token_id]
    for k, sampler in ((1, Sampler(False, 1.0, 0, 1.0)), (3, Sampler(True, 1.0, 5, 0.9))):
        runs = []
        for decode in (decode_padded, decode_shared):
            torch.manual_seed(3)
            with torch.inference_mode():
                runs.append(decode(model, prompts, k, 12, sampler, stops, tok.pad_token_id))
        assert runs[0] == runs[1]
        assert len(runs[1]) == len(prompts) * k and all(1 <= len(r) <= 12 for r in runs[1])


def test_shared_prefix_attention_equals_softmax_over_prompt_and_new_tokens():
    import torch

    from toolrl_lib.fast.decode import SharedPrefixState, decode_attention

    torch.manual_seed(0)
    lengths, k, heads, kv, dim, steps = [5, 3], 2, 4, 2, 8, 3
    state = SharedPrefixState(lengths, k, room=4, device="cpu")
    width = state.width
    layer = type("L", (), {})()
    layer.prefix_k, layer.prefix_v = torch.randn(2, kv, width, dim), torch.randn(2, kv, width, dim)
    layer.keys, layer.values = torch.randn(4, kv, steps, dim), torch.randn(4, kv, steps, dim)
    query = torch.randn(4, heads, 1, dim)
    state.keep_rows(torch.tensor([0, 1, 3]))  # row 2 (prompt 1, sample 0) finished
    layer.keys, layer.values, query = layer.keys[[0, 1, 3]], layer.values[[0, 1, 3]], query[[0, 1, 3]]
    got = decode_attention(query, layer, state, dim ** -0.5)
    for row, prompt in enumerate([0, 0, 1]):
        start = width - lengths[prompt]
        keys = torch.cat([layer.prefix_k[prompt, :, start:], layer.keys[row]], dim=-2)
        values = torch.cat([layer.prefix_v[prompt, :, start:], layer.values[row]], dim=-2)
        keys, values = keys.repeat_interleave(heads // kv, 0), values.repeat_interleave(heads // kv, 0)
        weights = torch.softmax(torch.einsum("hd,hld->hl", query[row, :, 0], keys) * dim ** -0.5, -1)
        expected = torch.einsum("hl,hld->hd", weights, values)
        assert torch.allclose(got[row, 0], expected, atol=1e-5)


def test_fused_attention_with_lse_matches_the_explicit_softmax_with_padding():
    """The CPU flash kernel's output and log-sum-exp (what joins the prefix and suffix parts)
    equal the explicit softmax's, with left padding masked to -inf, and with a key tensor that
    is a view into a larger buffer (the suffix cache's)."""
    import torch

    from toolrl_lib.fast.decode import attend_with_lse

    torch.manual_seed(0)
    query = torch.randn(3, 2, 6, 8)
    keys_buffer, values = torch.randn(3, 2, 9, 8), torch.randn(3, 2, 7, 8)
    keys = keys_buffer[:, :, :7]
    bias = torch.zeros(3, 1, 1, 7)
    bias[0, ..., :4] = float("-inf")  # prompt 0 is 3 tokens long, left-padded to 7
    out, lse = attend_with_lse(query, keys, values, 0.3, bias)
    scores = query @ keys.transpose(-1, -2) * 0.3 + bias
    assert torch.allclose(out, scores.softmax(-1) @ values, atol=1e-5)
    assert torch.allclose(lse, scores.logsumexp(-1), atol=1e-5)
    assert torch.isfinite(out).all()

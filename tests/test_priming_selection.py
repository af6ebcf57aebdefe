"""Priming on the shortest rows of a larger pool (``priming.shortest_of``): which examples are
chosen, that the option is validated, and that the priming records the tokens it trained on."""

import json

import pytest

from toolrl_lib.data.example import Example
from toolrl_lib.models import load_tokenizer, make_tiny_model
from toolrl_lib.prompts import get_adapter
from toolrl_lib.train.config import ConfigError, load_run_config
from toolrl_lib.train.dataset import priming_rows, prompt_length, shortest_examples

TOOL = {"name": "note", "description": "Save a note.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}


def notes(lengths: list[int]) -> list[Example]:
    """One example per length: a note of that many words (its row grows with it)."""
    return [Example(id=f"n{i}", source="synthetic", messages=[{"role": "user", "content": "Save it."}],
                    tools=[TOOL], ground_truth=[{"name": "note", "arguments": {"text": " ".join(["word"] * n)}}])
            for i, n in enumerate(lengths)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    make_tiny_model(root / "model")
    return root


def test_the_shortest_rows_are_kept_in_their_order(tiny):
    tokenizer, adapter = load_tokenizer(str(tiny / "model")), get_adapter("hermes")
    examples = notes([30, 2, 50, 1, 2, 40])
    chosen = shortest_examples(examples, 3, adapter, tokenizer)
    assert [e.id for e in chosen] == ["n1", "n3", "n4"]  # lengths 2, 1, 2: original order, ties by position
    rows = priming_rows(examples, adapter, tokenizer, 4096)
    lengths = sorted(prompt_length(tokenizer, r["prompt"] + r["completion"]) for r in rows)
    kept = priming_rows(chosen, adapter, tokenizer, 4096)
    assert sum(prompt_length(tokenizer, r["prompt"] + r["completion"]) for r in kept) == sum(lengths[:3])


def test_shortest_of_must_cover_num_examples():
    with pytest.raises(ConfigError, match="priming.shortest_of"):
        load_run_config(None, ["priming.enabled=true", "priming.num_examples=8", "priming.shortest_of=4"])
    assert load_run_config(None, ["priming.enabled=true", "priming.num_examples=8",
                                  "priming.shortest_of=16"]).priming.shortest_of == 16


def test_priming_on_the_shortest_rows_trains_on_fewer_tokens(tiny, tmp_path):
    from tests.test_train_run import tiny_overrides
    from toolrl_lib.train.priming import PRIMING_MARKER, prime

    examples = notes([40, 1, 35, 2, 30, 3, 45, 4])
    tokens = {}
    for pool in (0, 8):
        config = load_run_config(None, tiny_overrides(tiny, **{
            "priming.enabled": "true", "priming.max_steps": 1, "priming.batch_size": 2,
            "priming.num_examples": 4, "priming.shortest_of": pool}))
        out = prime(config, str(tiny / "model"), examples, "hermes", tmp_path / f"primed{pool}", "cpu")
        info = json.loads((out / PRIMING_MARKER).read_text())
        assert info["examples"]["kept"] == 4
        tokens[pool] = info["tokens"]
    tokenizer, adapter = load_tokenizer(str(tiny / "model")), get_adapter("hermes")
    rows = priming_rows(examples, adapter, tokenizer, 4096)
    lengths = [prompt_length(tokenizer, r["prompt"] + r["completion"]) for r in rows]
    assert tokens[0] == sum(lengths[:4])             # the first four
    assert tokens[8] == sum(sorted(lengths)[:4])     # the four shortest of eight
    assert tokens[8] < tokens[0]


def test_pre_tokenised_rows_count_their_ids(tiny, tmp_path):
    """Multi-turn priming hands ready rows (``input_ids`` + ``completion_mask``): their ids are the tokens."""
    from tests.test_train_run import tiny_overrides
    from toolrl_lib.train.priming import PRIMING_MARKER, prime

    rows = [{"input_ids": list(range(5, 5 + n)), "completion_mask": [0] * (n - 3) + [1] * 3} for n in (12, 20)]
    config = load_run_config(None, tiny_overrides(tiny, **{
        "priming.enabled": "true", "priming.max_steps": 1, "priming.batch_size": 2}))
    out = prime(config, str(tiny / "model"), [], "hermes", tmp_path / "primed", "cpu", rows=rows)
    info = json.loads((out / PRIMING_MARKER).read_text())
    assert info["tokens"] == 32 and info["examples"]["kinds"] == {"multi_turn": 2}

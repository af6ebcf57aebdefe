"""Issue 18's data levers: hard negatives in the GRPO mix and validation, kind-balanced order."""

from __future__ import annotations

from collections import Counter

from toolrl_lib.data.synthetic import generate_examples
from toolrl_lib.train.config import load_run_config
from toolrl_lib.train.mix import _text, balance_kinds, grpo_mix, hard_negatives


def test_hard_negatives_avoid_excluded_texts_and_are_deterministic():
    first = hard_negatives(40, seed=5)
    assert len(first) == 40 and {e.kind for e in first} == {"irrelevance"}
    assert {e.meta["negative"] for e in first} == {"irrelevance_near", "irrelevance_missing"}
    assert [e.to_dict() for e in first] == [e.to_dict() for e in hard_negatives(40, seed=5)]
    again = hard_negatives(40, seed=5, exclude=first[:10])
    assert not {_text(e) for e in first[:10]} & {_text(e) for e in again}
    assert hard_negatives(0, seed=5) == []


def test_balanced_order_spreads_every_kind_over_every_window():
    examples = generate_examples(400, seed=1)
    ordered = balance_kinds(examples, seed=0)
    assert sorted(e.id for e in ordered) == sorted(e.id for e in examples)  # a permutation
    share = Counter(e.kind for e in examples)
    for start in range(0, 400, 40):  # every 40-prompt window holds each kind within +-1 of its share
        window = Counter(e.kind for e in ordered[start:start + 40])
        for kind, n in share.items():
            assert abs(window[kind] - n * 40 / 400) <= 1.0 + 1e-9, (start, kind, window)
    assert [e.id for e in ordered] == [e.id for e in balance_kinds(examples, seed=0)]


def test_grpo_mix_adds_hard_negatives_and_orders_kinds():
    # the smoke profile's irrelevance oversampling off, so the counts are the mix's alone
    plain_mix = ["data.oversample_kinds={}"]
    config = load_run_config("configs/smoke.yaml", [*plain_mix, "data.hard_negatives=12",
                                                    "data.balance_kinds=true"])
    examples = generate_examples(48, seed=9)
    val = generate_examples(8, seed=10)
    mixed = grpo_mix(examples, config, val)
    assert len(mixed) == 48 + 12
    assert sum(e.meta.get("negative") is not None for e in mixed) == 12
    plain = grpo_mix(examples, load_run_config("configs/smoke.yaml", plain_mix), val)
    assert [e.id for e in plain] == [e.id for e in examples]  # defaults leave the mix alone


def test_balance_kinds_turns_off_trl_shuffle(tmp_path):
    from toolrl_lib.run_dir import RunDir
    from toolrl_lib.train.trainer import grpo_args

    for balanced in (False, True):
        config = load_run_config("configs/smoke.yaml", [f"data.balance_kinds={str(balanced).lower()}",
                                                         "device=cpu"])
        args = grpo_args(config, RunDir(tmp_path), "cpu")
        assert args.shuffle_dataset is (not balanced)

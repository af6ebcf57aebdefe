"""Group statistics (zero variance, advantages) and the worked/hacking probe tables."""

from __future__ import annotations

import math

import pytest

from toolrl_lib.data.synthetic import generate_examples
from toolrl_lib.rewards import SCHEMES, reward_range
from toolrl_lib.rewards.groups import group_advantages, grouped, zero_variance_fraction
from toolrl_lib.rewards.probes import WORKED_TOOLS, hacking_probes, score_table, worked_cases


def test_zero_variance_fraction_and_advantages():
    rewards = [1, 1, 1, 1, 0, 1, 0, 1, 0.5, 0.5, 0.5, 0.5]
    assert zero_variance_fraction(rewards, 4) == pytest.approx(2 / 3)
    advantages = group_advantages(rewards, 4)
    assert advantages[:4] == [0, 0, 0, 0] and advantages[8:] == [0, 0, 0, 0]
    assert advantages[5] > 0 > advantages[4]
    assert math.isclose(sum(advantages[4:8]), 0, abs_tol=1e-9)


def test_single_generation_means_zero_advantage():
    rewards = [0.3, -1.0, 1.0, 0.7]
    assert zero_variance_fraction(rewards, 1) == 1.0
    assert group_advantages(rewards, 1) == [0, 0, 0, 0]
    assert group_advantages(rewards, 1, scale=False) == [0, 0, 0, 0]


def test_grouped_rejects_bad_sizes():
    with pytest.raises(ValueError):
        grouped([1, 2, 3], 2)
    with pytest.raises(ValueError):
        grouped([1, 2], 0)


def test_worked_table_orders_cases_sensibly():
    table = score_table(worked_cases("hermes"), WORKED_TOOLS)
    for scheme in SCHEMES:
        lo, hi = reward_range(scheme)
        assert table.loc["correct call + reasoning", scheme] == hi
        assert table.loc["malformed JSON", scheme] == lo
        assert table[scheme].between(lo, hi).all()
    assert table.loc["wrong value (days 4)", "weighted"] > table.loc["wrong function", "weighted"]
    assert table.loc["extra call", "fine_grained"] > table.loc["missing call (1 of 2)", "fine_grained"]


@pytest.mark.parametrize("family", ["hermes", "mistral"])
def test_hacking_probes_never_beat_the_reference(family):
    example = next(e for e in generate_examples(20, seed=5) if e.ground_truth)
    table = score_table(hacking_probes(example, family, prompt=example.query), example.tools,
                        family=family, context=example.query)
    for scheme in SCHEMES:
        reference = table.loc["reference answer", scheme]
        assert reference == reward_range(scheme)[1]
        others = table.drop(index=["reference answer"])[scheme]
        assert (others <= reference).all()
    assert table.loc["copy the query as reasoning", "reasoning"] == 0
    assert table.loc["call every tool, no args", "binary"] == 0


def test_pick_by_kind_round_robin():
    from toolrl_lib.rewards.probes import pick_by_kind

    examples = generate_examples(40, seed=2)
    picked = pick_by_kind(examples, 4)
    kinds = {e.kind for e in examples}
    assert len(picked) == 4 and len({e.kind for e in picked}) == min(4, len(kinds))
    assert pick_by_kind(examples[:2], 5) == examples[:2]

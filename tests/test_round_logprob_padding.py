"""The round log-prob forward's padding count (benchmarks/round_logprob_padding.py), on the CPU."""

import json

from benchmarks import round_logprob_padding as rp


def test_equal_prompts_have_no_padding_in_any_order():
    rows = rp.simulate([50] * 100, prompts=8, group=4, completion=16, chunk_rows=[8, 32], rounds=3, seed=0)
    assert {(r["chunk_rows"], r["order"]) for r in rows} == {(8, "arrival"), (8, "sorted"), (32, "arrival"), (32, "sorted")}
    assert all(r["prompt_positions_ratio"] == 1.0 and r["completion_keys_ratio"] == 1.0 for r in rows)
    assert [r["chunks_per_round"] for r in rows if r["order"] == "sorted"] == [4.0, 1.0]


def test_sorted_chunks_pad_less_than_arrival_order_and_one_chunk_is_the_same_either_way():
    lengths = [20, 200] * 50
    rows = {(r["chunk_rows"], r["order"]): r for r in rp.simulate(
        lengths, prompts=16, group=8, completion=32, chunk_rows=[16, 128], rounds=20, seed=1)}
    assert rows[(16, "sorted")]["prompt_positions_ratio"] < rows[(16, "arrival")]["prompt_positions_ratio"]
    assert rows[(16, "sorted")]["completion_keys_ratio"] < rows[(16, "arrival")]["completion_keys_ratio"]
    assert rows[(128, "sorted")] == {**rows[(128, "arrival")], "order": "sorted"}  # the whole round in one chunk


def test_main_counts_a_training_file_and_writes_its_tables(tmp_path):
    from toolrl_lib.data.example import write_jsonl
    from toolrl_lib.data.synthetic import generate_examples

    write_jsonl(generate_examples(40, seed=3), tmp_path / "train.jsonl")
    assert rp.main(["--train", str(tmp_path / "train.jsonl"), "--round-prompts", "8", "--chunk-rows", "16,64",
                    "--rounds", "5", "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "round_logprob_padding.json").read_text())
    assert result["prompts"]["count"] == 40 and len(result["rows"]) == 4
    assert all(r["prompt_positions_ratio"] >= 1.0 for r in result["rows"])
    assert "| 16 |" in (tmp_path / "out" / "round_logprob_padding.md").read_text()

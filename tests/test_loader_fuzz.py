"""Issue 22: property-based fuzz of every loader (xLAM, ToolACE, BFCL, parquet) through
``prepare``. The rows and the invariants are ``tests.fixtures.hostile``'s (the benchmark
``benchmarks/loader_fuzz.py`` runs the same at volume); CI draws a fixed sequence
(``HYPOTHESIS_PROFILE=ci``) and keeps ``max_examples`` small."""

from __future__ import annotations

import shutil
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.hostile import KINDS, LOADERS, check_prepared, good_rows, make_row, write_rows
from toolrl_lib.data.pipeline import prepare

HOSTILE_ALPHABET = st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Z", "Cc"))
PAYLOADS = st.text(alphabet=HOSTILE_ALPHABET, max_size=40) | st.sampled_from(
    ["[", "]", "{", "}", '"', "'", "(", ")", "\\", "NaN", "\x00", "\u2028", "[f(a=1", ""])


@cache
def _bases(loader: str) -> tuple:
    return tuple(good_rows(loader, 12, seed=3))


def _run(tmp_path, loader: str, specs: list[tuple[str, str, int]]) -> list[str]:
    bases = _bases(loader)
    rows = [make_row(loader, "good", bases[0])]  # a good first row: the file is JSON lines
    rows += [make_row(loader, kind, bases[(i + 1) % len(bases)], payload, cut)
             for i, (kind, payload, cut) in enumerate(specs)]
    name = "BFCL_v4_exec_simple.json" if loader == "bfcl" else "rows.jsonl"
    folder = tmp_path / "fuzz"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    path = write_rows(rows, folder / name)
    prepare(loader, path, folder / "out", contamination=False, dedup=False, val_fraction=0.0)
    return check_prepared(rows, name, folder / "out")


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_hostile_kind_keeps_the_invariants(tmp_path, loader, kind):
    specs = [(kind, payload, cut) for cut, payload in enumerate(["", "[x", '"q\x00', "\u2028"])]
    specs += [("good", "", 0), (kind, "}", 4099)]
    assert _run(tmp_path, loader, specs) == []


@pytest.mark.parametrize("loader", LOADERS)
def test_loader_fuzz(tmp_path_factory, loader):
    @settings(max_examples=20, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(st.tuples(st.sampled_from(KINDS), PAYLOADS, st.integers(0, 10**6)),
                    min_size=1, max_size=6))
    def fuzz(specs):
        assert _run(tmp_path_factory.mktemp(loader), loader, specs) == []

    fuzz()

from dataclasses import dataclass, field
from typing import Literal

import pytest

from toolrl_lib.config import ConfigError, apply_overrides, from_dict, load


@dataclass
class Inner:
    rank: int = 8
    targets: list[str] = field(default_factory=lambda: ["q_proj"])


@dataclass
class Outer:
    name: str
    lr: float = 1e-5
    kind: Literal["a", "b"] = "a"
    inner: Inner = field(default_factory=Inner)
    maybe: int | None = None


def test_builds_nested_and_coerces_ints_to_floats():
    cfg = from_dict(Outer, {"name": "x", "lr": 1, "inner": {"rank": 16}})
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float)
    assert cfg.inner.rank == 16 and cfg.inner.targets == ["q_proj"]


def test_unknown_key_is_named_with_its_path():
    with pytest.raises(ConfigError, match=r"inner\.rnak"):
        from_dict(Outer, {"name": "x", "inner": {"rnak": 4}})


def test_wrong_type_and_literal_are_named():
    with pytest.raises(ConfigError, match=r"inner\.rank: expected an integer"):
        from_dict(Outer, {"name": "x", "inner": {"rank": "big"}})
    with pytest.raises(ConfigError, match=r"kind: must be one of"):
        from_dict(Outer, {"name": "x", "kind": "c"})
    with pytest.raises(ConfigError, match="expected true/false"):
        from_dict(_BoolCfg, {"flag": "yes"})


@dataclass
class _BoolCfg:
    flag: bool = False


def test_missing_required_key():
    with pytest.raises(ConfigError, match="missing required key.*name"):
        from_dict(Outer, {})


def test_optional_accepts_none_and_value():
    assert from_dict(Outer, {"name": "x", "maybe": None}).maybe is None
    assert from_dict(Outer, {"name": "x", "maybe": 3}).maybe == 3


def test_overrides_parse_yaml_values_and_nest():
    data = apply_overrides({"name": "x"}, ["inner.rank=32", "lr=2e-5", "inner.targets=[a, b]"])
    cfg = from_dict(Outer, data)
    assert cfg.inner.rank == 32 and cfg.lr == 2e-5 and cfg.inner.targets == ["a", "b"]
    with pytest.raises(ConfigError, match="key.path=value"):
        apply_overrides({}, ["novalue"])


def test_load_names_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nbogus: 1\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: unknown key\(s\) bogus"):
        load(Outer, path)
    path.write_text("- a list\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load(Outer, path)
    with pytest.raises(ConfigError, match="not found"):
        load(Outer, tmp_path / "missing.yaml")

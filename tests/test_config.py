from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assign_add import config as C
from assign_add import machine as M
from assign_add.config import ConfigError


def test_paper_preset_matches_the_authors_setup(paper_cfg):
    t, m, tr = paper_cfg.task, paper_cfg.model, paper_cfg.train
    assert (t.modulus, t.n_ctx, t.layout, t.f, t.split_seed) == (59, 16, "prefix", 0.7, 42)
    assert t.variables == list("abcdefghijkl")
    assert (t.min_assignments, t.max_assignments) == (1, 6)
    assert t.forbidden_right == ["a", "b"] and t.forbidden_left == ["k", "l"]
    assert [round(x * 42) for x in t.mixture.as_list()] == [12, 10, 10, 10]
    assert (m.n_layers, m.n_heads, m.d_model, m.d_head, m.d_mlp, m.mlp_in_first_layer) == (2, 1, 128, 128, 512, False)
    assert (tr.lr, tr.weight_decay, tr.beta1, tr.beta2, tr.batch_size, tr.steps, tr.seed) == (
        1e-3, 0.02, 0.9, 0.999, 512, 40_000, 42)


def test_toml_round_trip_and_overrides(tmp_path, paper_cfg):
    cfg = C.apply_overrides(paper_cfg, ["task.f=0.25", "train.steps=2_000", "task.mixture.two_var=0.1",
                                        "task.forbidden_left=k", "model.mlp_in_first_layer=true", "task.layout=infix"])
    assert cfg.task.f == 0.25 and cfg.train.steps == 2000 and cfg.task.mixture.two_var == 0.1
    assert cfg.task.forbidden_left == ["k"] and cfg.model.mlp_in_first_layer is True and cfg.task.layout == "infix"
    C.save(cfg, tmp_path / "c.toml")
    assert C.load(tmp_path / "c.toml") == cfg


@pytest.mark.parametrize(
    "overrides, field",
    [
        (["task.f=0"], "task.f"),
        (["task.f=1.5"], "task.f"),
        (["task.max_assignments=7"], "task.max_assignments"),
        (["task.forbidden_left=z"], "task.forbidden_left"),
        (["task.forbidden_right=a,q"], "task.forbidden_right"),
        (["task.mixture.zero_var=0.5"], "task.mixture"),
        (["task.modulus=1"], "task.modulus"),
        (["task.layout=postfix"], "task.layout"),
        (["train.steps=abc"], "train.steps"),
        (["train.lr=-1"], "train.lr"),
        (["model.d_model=0"], "model.d_model"),
        (["task.nothing=1"], "task.nothing"),
        (["nosection.x=1"], "nosection.x"),
        (["train.steps"], "train.steps"),
    ],
)
def test_invalid_configs_name_the_field(overrides, field):
    with pytest.raises(ConfigError) as info:
        C.resolve("paper", overrides=overrides)
    assert str(info.value).startswith(field + ":")
    assert "\n" not in str(info.value)


def test_unknown_preset_and_bad_toml(tmp_path):
    with pytest.raises(ConfigError, match="preset"):
        C.preset("nope")
    bad = tmp_path / "bad.toml"
    bad.write_text("task = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        C.load(bad)


@settings(max_examples=50, deadline=None)
@given(f=st.floats(0.25, 1.0), steps=st.integers(1, 10**6), mod=st.integers(2, 500))
def test_override_values_are_coerced_to_field_types(f, steps, mod):
    cfg = C.resolve("paper", overrides=[f"task.f={f!r}", f"train.steps={steps}", f"task.modulus={mod}"])
    assert cfg.task.f == pytest.approx(f) and cfg.train.steps == steps and cfg.task.modulus == mod
    assert isinstance(cfg.train.steps, int) and isinstance(cfg.task.f, float)


@pytest.mark.parametrize(
    "compiled, on_cuda, flags, expected",
    [
        (True, False, {"avx512f", "amx_bf16"}, "bf16"),  # compiled on a CPU with AMX: measured 1.30x
        (True, False, {"avx512f", "avx512_bf16"}, "bf16"),
        (False, False, {"avx512f", "amx_bf16"}, "fp32"),  # eager bf16 measured slower than eager fp32
        (True, False, {"avx2", "avx512f"}, "fp32"),  # bf16 would be emulated
        (True, False, set(), "fp32"),  # no /proc/cpuinfo (not Linux)
        (False, True, set(), "bf16"),  # CUDA: the authors' precision
    ],
)
def test_auto_precision_chooses_bf16_only_where_it_was_measured_to_pay(compiled, on_cuda, flags, expected):
    assert M.auto_precision(compiled, on_cuda, frozenset(flags)) == expected


def test_validate_settles_auto_and_keeps_an_explicit_precision():
    cpu = ["train.device=cpu"]
    eager = C.resolve("paper", overrides=cpu)
    compiled = C.resolve("paper", overrides=[*cpu, "train.compile=true"]) if M.has_c_compiler() else None
    assert eager.train.precision == "fp32"
    if compiled is not None:
        assert compiled.train.precision == M.auto_precision(True, False, M.cpu_flags())
    assert C.resolve("paper", overrides=[*cpu, "train.precision=bf16"]).train.precision == "bf16"
    assert C.resolve("paper", overrides=[*cpu, "train.compile=true", "train.precision=fp32"]
                     if M.has_c_compiler() else cpu).train.precision == "fp32"
    with pytest.raises(ConfigError, match="^train.precision:"):
        C.resolve("paper", overrides=["train.precision=fp16"])

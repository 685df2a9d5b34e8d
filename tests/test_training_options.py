"""The training changes a rescue arm may use: an early mixture, a QK learning-rate multiple, a warm restart."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file

from assign_add.config import ConfigError, resolve
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Sampler
from assign_add.train.trainer import QK_WEIGHTS, lr_factor, make_optimizer, train

from conftest import small_paper_cfg


def test_lr_factor_exact_values():
    t = resolve("paper", overrides=["train.lr_restart_at=100", "train.lr_restart_peak=3",
                                    "train.lr_restart_steps=10"]).train
    assert [lr_factor(t, s) for s in (0, 99)] == [1.0, 1.0]
    assert lr_factor(t, 100) == 3.0  # the jump
    assert lr_factor(t, 105) == pytest.approx(2.0, abs=1e-15)  # half way down the half cosine
    assert [lr_factor(t, s) for s in (110, 10_000)] == [1.0, 1.0]
    assert lr_factor(resolve("paper").train, 100) == 1.0  # no restart by default


@settings(max_examples=50, deadline=None)
@given(at=st.integers(1, 10_000), peak=st.floats(0.1, 10), steps=st.integers(1, 5000), k=st.integers(0, 20_000))
def test_lr_factor_stays_between_one_and_the_peak(at, peak, steps, k):
    t = resolve("paper", overrides=[f"train.lr_restart_at={at}", f"train.lr_restart_peak={peak}",
                                    f"train.lr_restart_steps={steps}"]).train
    f = lr_factor(t, k)
    assert min(1.0, peak) - 1e-12 <= f <= max(1.0, peak) + 1e-12
    if not at <= k < at + steps:
        assert f == 1.0


def test_early_mixture_applies_before_its_step_only():
    cfg = resolve("paper", overrides=["task.early_mixture.zero_var=1.0", "task.early_mixture.var_left=0",
                                      "task.early_mixture.var_right=0", "task.early_mixture.two_var=0",
                                      "task.early_mixture_until=5"])
    early, plain = Sampler(cfg.task, 7), Sampler(resolve("paper").task, 7)
    for step in range(5):
        b = early.batch(step, 256)
        assert (b.lhs_var == -1).all() and (b.rhs_var == -1).all(), "only 0-var queries before the switch"
    for step in (5, 9):
        b, ref = early.batch(step, 256), plain.batch(step, 256)
        assert np.array_equal(b.tokens, ref.tokens), "after the switch the batches are the default's"
        assert (b.lhs_var >= 0).any()


def test_bad_options_are_clear_errors():
    for override, field in (("train.qk_lr_scale=0", "train.qk_lr_scale"), ("train.lr_restart_at=-1", "train.lr_restart_at"),
                            ("train.lr_restart_steps=0", "train.lr_restart_steps"),
                            ("task.early_mixture.zero_var=0.9", "task.early_mixture"),
                            ("task.early_mixture_until=-5", "task.early_mixture_until")):
        with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
            resolve("paper", overrides=[override])


def _one_step_delta(qk_scale: float) -> dict[str, torch.Tensor]:
    cfg = resolve("paper", overrides=[f"train.qk_lr_scale={qk_scale}", "train.batch_size=64"])
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=3)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = make_optimizer(model, cfg)
    tokens = torch.as_tensor(Sampler(cfg.task, 3).batch(0, 64).tokens)
    model(tokens)[:, -1].logsumexp(-1).mean().backward()
    opt.step()
    return {n: p.detach() - before[n] for n, p in model.named_parameters()}


def test_qk_learning_rate_multiple_scales_only_the_qk_update():
    from assign_add.bench import torch_threads

    # one thread: with more, the embedding's backward may sum its gradient in another order run to run
    with torch_threads(1):
        one, three = _one_step_delta(1.0), _one_step_delta(3.0)
    qk = [n for n in one if n.endswith(QK_WEIGHTS)]
    assert len(qk) == 4  # W_Q and W_K of both layers
    for n in one:
        if n in qk:
            # AdamW's whole update (step and decoupled decay) is proportional to lr: 3x, up to float32
            # rounding of w + delta (|w| ~ 0.1, delta ~ 1e-3: relative error ~ 1e-4)
            torch.testing.assert_close(three[n], 3 * one[n], rtol=1e-3, atol=1e-6)
        else:
            assert torch.equal(three[n], one[n]), n


@pytest.mark.slow
def test_resume_with_two_groups_and_a_restart_equals_an_uninterrupted_run(tmp_path):
    opts = ("train.steps=60", "train.batch_size=64", "train.eval_every=20", "train.state_every=20",
            "train.qk_lr_scale=2", "train.lr_restart_at=30", "train.lr_restart_steps=20")
    cfg = small_paper_cfg(*opts)
    train(cfg, tmp_path / "straight")
    train(cfg, tmp_path / "halted", stop_after=40)
    train(cfg, tmp_path / "halted", resume=True)
    a = load_file(str(tmp_path / "straight" / "checkpoints" / "step_000060.safetensors"))
    b = load_file(str(tmp_path / "halted" / "checkpoints" / "step_000060.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    plain = small_paper_cfg(*opts[:4])
    train(plain, tmp_path / "plain")
    c = load_file(str(tmp_path / "plain" / "checkpoints" / "step_000060.safetensors"))
    assert not torch.equal(a["blocks.0.attn.W_Q"], c["blocks.0.attn.W_Q"]), "the options change training"
    assert not math.isnan(float(a["blocks.0.attn.W_Q"].sum()))

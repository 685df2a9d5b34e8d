"""K seeds in one stacked step (torch.func.stack_module_state + vmap, one AdamW): each seed's weights are the
ones it would reach alone, a change to one seed's data moves that seed alone, and the gain arithmetic on
hand-made timings (no speed asserted)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from assign_add import bench
from assign_add.config import preset
from assign_add.model.fast import fast_answer_logits
from assign_add.model.hooked import AssignAddTransformer
from assign_add.task.generator import Sampler
from assign_add.train.trainer import make_optimizer, train_step

SEEDS = (3, 4, 5)
STEPS = 3
BATCH = 32


def tiny_models(seeds=SEEDS) -> list[AssignAddTransformer]:
    cfg = preset("tiny")
    return [AssignAddTransformer.from_config(cfg.model, cfg.task, seed=s).double() for s in seeds]


def stacked_run(samplers) -> bench.StackedSeeds:
    stacked = bench.stack_seeds(tiny_models(), preset("tiny"))
    for step in range(STEPS):
        stacked.step(*bench.seed_batches(samplers, step, BATCH, torch.device("cpu")))
    return stacked


def test_each_stacked_seed_ends_where_its_single_run_does():
    cfg = preset("tiny")
    singles = tiny_models()
    for seed, model in zip(SEEDS, singles):  # the trainer's own step, one seed at a time
        opt, sampler = make_optimizer(model, cfg), Sampler(cfg.task, seed)
        for step in range(STEPS):
            train_step(model, opt, sampler, step, BATCH, fast_answer_logits, contextlib.nullcontext(),
                       torch.device("cpu"))
    stacked = stacked_run([Sampler(cfg.task, s) for s in SEEDS])
    start = tiny_models()
    for k, model in enumerate(singles):
        state = stacked.seed_state(k)
        assert set(state) == {n for n, _ in model.named_parameters()}
        for name, p in model.named_parameters():
            assert state[name].dtype == torch.float64
            assert not torch.equal(p, dict(start[k].named_parameters())[name])  # three updates moved it
            # float64, same initial weights, batches and AdamW: only the order in which the batched (vmapped)
            # products sum may differ from the single step's, so float64 rounding carried through three updates
            # bounds the difference (on the AMD EPYC with torch 2.13 the two agree bit for bit)
            torch.testing.assert_close(state[name], p.detach(), rtol=1e-12, atol=1e-12 * float(p.detach().abs().max()))


def test_a_planted_change_in_one_seeds_batch_moves_that_seed_alone():
    cfg = preset("tiny")
    base = stacked_run([Sampler(cfg.task, s) for s in SEEDS])
    planted = stacked_run([Sampler(cfg.task, s) for s in (SEEDS[0], 99, SEEDS[2])])  # seed 1 sees other data
    for k in range(len(SEEDS)):
        a, b = base.seed_state(k), planted.seed_state(k)
        same = all(torch.equal(a[n], b[n]) for n in a)
        assert same == (k != 1), f"seed index {k}"


def test_the_stacked_seed_axis_and_losses():
    cfg = preset("tiny")
    stacked = bench.stack_seeds(tiny_models(), cfg)
    tokens, answers = bench.seed_batches([Sampler(cfg.task, s) for s in SEEDS], 0, BATCH, torch.device("cpu"))
    assert stacked.k == 3 and tokens.shape == (3, BATCH, cfg.task.n_ctx) and answers.shape == (3, BATCH)
    losses = stacked.losses(tokens, answers)
    alone = [float(bench.answer_loss(fast_answer_logits(m, tokens[k]), answers[k]).detach())
             for k, m in enumerate(tiny_models())]
    assert losses.detach().tolist() == pytest.approx(alone, rel=1e-12)


def test_gains_on_hand_made_timings():
    rows = [bench.StackedTiming("eager", 1, 1, 10.0), bench.StackedTiming("eager", 2, 1, 6.0),
            bench.StackedTiming("eager", 1, 4, 20.0), bench.StackedTiming("eager", 2, 4, 16.0)]
    one, two = bench.stacked_gains(rows)
    assert (one.stacked.k, one.stacked.threads) == (4, 1)
    assert one.same_threads == pytest.approx(2.0) and one.per_core == pytest.approx(2.0)  # 10 ms vs 20 / 4
    assert two.same_threads == pytest.approx(6.0 / 4.0)  # 6 ms vs 16 / 4 at two threads
    assert two.per_core == pytest.approx(10.0 / 8.0)  # 16 ms on 2 cores for 4 seeds = 8 core-ms per seed
    assert bench.stacked_gains(rows[2:]) == []  # no single-seed row to compare with


def test_stacked_bench_times_every_k_on_the_same_path():
    rows = bench.bench_stacked(preset("tiny"), steps=1, ks=(2,), threads=(1,))
    assert [(r.path, r.threads, r.k) for r in rows] == [("eager", 1, 1), ("eager", 1, 2)]
    assert all(r.ms_per_step > 0 for r in rows)


def test_bench_stacked_prints_the_rule_line(monkeypatch):
    from typer.testing import CliRunner

    from assign_add.cli import app

    monkeypatch.setattr("assign_add.machine.has_c_compiler", lambda: False)  # eager only: no compile in a test
    result = CliRunner().invoke(app, ["bench", "--what", "stacked", "--steps", "1", "--stack", "2", "--preset", "tiny"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "stacked K seeds:" in out and "per seed at K=2" in out and "rule: keep at >= 1.3x" in out
    assert "(eager, one thread each way)" in out


def test_bench_stacked_refuses_one_seed_per_step():
    from typer.testing import CliRunner

    from assign_add.cli import app

    result = CliRunner().invoke(app, ["bench", "--what", "stacked", "--stack", "1", "--preset", "tiny"])
    assert result.exit_code == 2 and "--stack" in result.output

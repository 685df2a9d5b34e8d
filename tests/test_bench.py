"""The benchmark's arithmetic on hand-made timings, and its profile and paths end to end (no speed asserted)."""

from __future__ import annotations

import pytest

from assign_add import bench
from conftest import small_paper_cfg


def test_step_profile_shares_on_hand_made_timings():
    p = bench.StepProfile(data_ms=1.0, forward_ms=2.0, backward_ms=3.0, optimizer_ms=4.0, eval_s=0.5, eval_every=100,
                          matmul_flops=1e9)
    assert p.step_ms == 10.0
    assert p.eval_share == pytest.approx(5 / 15)  # 0.5 s per 100 steps = 5 ms per step beside 10 ms of training
    assert p.gflops == pytest.approx(100.0)  # 1 GFLOP in 10 ms


@pytest.mark.slow
def test_profile_counts_the_same_matmul_work_every_time():
    cfg = small_paper_cfg("train.batch_size=32")
    a, b = bench.profile_step(cfg, steps=2), bench.profile_step(cfg, steps=2)
    assert a.matmul_flops == b.matmul_flops > 0
    assert min(a.data_ms, a.forward_ms, a.backward_ms, a.optimizer_ms) > 0 and 0 < a.eval_share < 1


def test_both_forward_paths_are_timed_on_the_same_work():
    rows = bench.bench_paths(small_paper_cfg("train.batch_size=32"), steps=2, compiled=False)
    assert [r.name for r in rows] == ["two-layer rows (fp32)", "general path (fp32)"]
    assert all(r.seq_per_s > 0 for r in rows)


def test_packed_minutes_on_hand_made_timings():
    # one run: 40,000 steps x 10 ms = 400 s, plus 401 evaluations x 0.2 s = 80.2 s
    assert bench.packed_minutes(1, 40_000, 10.0, 0.2, 100, cores=2) == pytest.approx(480.2 / 60)
    # three runs on two cores: 1.5 runs' time; on eight cores: one run's time (a run uses one core)
    assert bench.packed_minutes(3, 40_000, 10.0, 0.2, 100, cores=2) == pytest.approx(1.5 * 480.2 / 60)
    assert bench.packed_minutes(3, 40_000, 10.0, 0.2, 100, cores=8) == pytest.approx(480.2 / 60)


def test_targets_say_reached_and_how_far_short():
    ratio, main, sweep = bench.speed_targets(engine_ratio=5.0, step_ms=10.0, eval_s=0.0, eval_every=100, cores=2)
    assert (ratio.reached, ratio.factor_short) == (False, pytest.approx(2.0))  # 5x of a 10x goal
    assert main.value == pytest.approx(3 * 400 / 2 / 60)  # 10 min: within 15
    assert (main.reached, main.factor_short) == (True, 1.0)
    assert sweep.value == pytest.approx(20 * 300 / 2 / 60)  # 50 min: within 60
    assert sweep.reached
    slow = bench.speed_targets(engine_ratio=12.0, step_ms=30.0, eval_s=0.0, eval_every=100, cores=2)
    assert slow[0].reached and not slow[1].reached and slow[1].factor_short == pytest.approx(30 / 15)


def test_a_goal_out_of_reach_even_at_the_matmul_floor():
    # 30 ms steps, floor 12 ms: 3 x 40,000 steps on 2 cores is 30 min now and 12 min at the floor (reachable);
    # a 25 ms floor would still be 25 min (out of reach of the 15-minute goal)
    _, main, _ = bench.speed_targets(engine_ratio=8.0, step_ms=30.0, eval_s=0.0, eval_every=100, cores=2, floor_ms=12.0)
    assert main.at_floor == pytest.approx(12.0) and main.reachable and not main.reached
    _, main, _ = bench.speed_targets(engine_ratio=8.0, step_ms=30.0, eval_s=0.0, eval_every=100, cores=2, floor_ms=25.0)
    assert main.reachable is False
    assert bench.speed_targets(8.0, 30.0, 0.0, 100, 2)[0].reachable is None  # no floor given

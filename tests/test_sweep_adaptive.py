"""The adaptive sweep design: exact rounds on hand-built curves, the full grid's threshold on every monotone
curve, a planted dip that it misses (and says so), the replay command, and a tiny live adaptive sweep."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from assign_add.cli import app
from assign_add.stats import monotone_crossing
from assign_add.sweep.adaptive import first_values, grid_step, next_values, replay, run_design

GRID = [float(i) for i in range(20)]  # 20 evenly spaced values, as the authors' grids


def _step_curve(at: int, low: float = 0.1, high: float = 1.0) -> dict[float, float]:
    return {g: (high if i >= at else low) for i, g in enumerate(GRID)}


def test_first_round_is_both_ends_and_the_middle():
    assert first_values(GRID, 1) == [0.0, 10.0, 19.0]
    assert first_values(GRID, 2) == [0.0, 10.0, 19.0]
    assert first_values(GRID, 4) == [0.0, 6.0, 13.0, 19.0]
    assert first_values([0.3, 0.1, 0.2], 8) == [0.1, 0.2, 0.3], "never more values than the grid has"


def test_rounds_on_a_step_at_seven():
    """Hand-followed: 0, 10, 19 → crossing 10 above 0 → the gap 1..9 split in three (4, 7) → crossing 7
    above 4 → the gap 5, 6 → crossing 7 above 6: located."""
    curve = _step_curve(7)
    result = run_design(GRID, lambda vals: {v: curve[v] for v in vals}, 0.9, per_round=2)
    assert result.rounds == [[0.0, 10.0, 19.0], [4.0, 7.0], [5.0, 6.0]]
    assert result.threshold == 7.0
    assert len(result.values) == 7


def test_a_crossing_at_the_first_value_or_nowhere_stops_after_the_first_round():
    up = _step_curve(0)
    assert next_values(GRID, {v: up[v] for v in (0.0, 10.0, 19.0)}, 0.9, 2) == []
    never = _step_curve(99)
    assert next_values(GRID, {v: never[v] for v in (0.0, 10.0, 19.0)}, 0.9, 2) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=3, max_size=25), st.integers(1, 8), st.floats(0.05, 0.95))
def test_on_a_monotone_curve_it_finds_the_full_grids_threshold_exactly(raw, per_round, level):
    """With a non-decreasing mean curve the monotone fit is the curve itself, so bisection must land on the
    grid's first value at or above the level, running no more values than the grid has."""
    grid = [float(i) / 10 for i in range(len(raw))]
    means = dict(zip(grid, sorted(raw)))
    full = monotone_crossing(np.asarray(grid), np.asarray([means[g] for g in grid]), level)
    result = run_design(grid, lambda vals: {v: means[v] for v in vals}, level, per_round)
    assert result.threshold == full
    assert len(result.values) == len(set(result.values)) <= len(grid)


def test_a_dip_between_the_values_it_runs_is_missed_and_the_replay_says_so():
    """Planted: 0.95 from value 3 on except a dip to 0 at 15.  The full grid's monotone fit pools the dip
    (12 × 0.95 / 13 = 0.877 < 0.9), so its threshold is 16; the adaptive design never runs 15 and says 3."""
    means = {g: (0.0 if i < 3 else 0.95) for i, g in enumerate(GRID)}
    means[15.0], means[19.0] = 0.0, 1.0
    r = replay(GRID, means, 0.9, per_round=2)
    assert r["grid_threshold"] == 16.0 and r["adaptive"]["threshold"] == 3.0
    assert r["within_one_step"] is False
    clean = dict(means)
    clean[15.0] = 0.95
    r = replay(GRID, clean, 0.9, per_round=2)
    assert r["grid_threshold"] == r["adaptive"]["threshold"] == 3.0 and r["within_one_step"] is True
    assert r["runs_per_seed"] == {"grid": 20, "adaptive": len(r["adaptive"]["values"])} and len(r["adaptive"]["values"]) < 20


def test_grid_step_and_missing_scores():
    assert grid_step([0.0, 0.05, 0.1]) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="no score at 2"):
        replay([0.0, 1.0, 2.0], {0.0: 0.1, 1.0: 0.9}, 0.9, 1)


def _sweep_folder(path, means: dict[float, float | None], adaptive: bool = False):
    path.mkdir()
    summary = {"spec": {"values": list(means)}, "rows": [{"value": v, "mean": m} for v, m in means.items()]}
    if adaptive:
        summary["adaptive"] = {"rounds": []}
    (path / "sweep.json").write_text(json.dumps(summary))
    return path


def test_replay_command_prints_and_writes_both_thresholds(tmp_path):
    curve = _step_curve(7)
    folder = _sweep_folder(tmp_path / "f", curve)
    res = CliRunner().invoke(app, ["sweep-replay", str(folder), "--out", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    assert "full grid threshold 7; adaptive 7 (within one grid step, 1)" in res.output
    assert "Cost per seed: 7 runs in 3 rounds (3, 2, 2 values), against 20 for the grid" in res.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["adaptive"]["rounds"] == [[0.0, 10.0, 19.0], [4.0, 7.0], [5.0, 6.0]]


def test_replay_refuses_a_summary_of_another_shape(tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "sweep.json").write_text("[1, 2]")
    res = CliRunner().invoke(app, ["sweep-replay", str(tmp_path / "f")])
    assert res.exit_code != 0 and "not a sweep summary" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("means, adaptive, message", [
    ({0.0: 0.1, 1.0: None, 2.0: 1.0}, False, "1 of 3 values unfinished"),
    ({0.0: 0.1, 1.0: float("nan"), 2.0: 1.0}, False, "1 of 3 values unfinished"),
    ({0.0: 0.1, 1.0: 0.5, 2.0: 1.0}, True, "an adaptive sweep"),
])
def test_replay_refuses_a_sweep_that_did_not_run_the_full_grid(tmp_path, means, adaptive, message):
    folder = _sweep_folder(tmp_path / "f", means, adaptive)
    res = CliRunner().invoke(app, ["sweep-replay", str(folder)])
    assert res.exit_code != 0 and message in res.output and "Traceback" not in res.output


TINY = ["task.eval_pool_size=100", "model.d_model=32", "model.d_head=32", "model.d_mlp=64", "train.batch_size=64"]


@pytest.mark.slow
def test_tiny_adaptive_sweep_runs_a_subset_and_resumes(tmp_path):
    """30 steps learn nothing, so no value reaches 90 %: the design stops after its first round (both ends and
    the middle of 5 values), and the folder is an ordinary sweep of those 3 values.  Run again, nothing retrains."""
    from assign_add.sweep.spec import make_spec
    from assign_add.sweep.sweep import run_adaptive_sweep

    spec = make_spec(None, "task.f", [0.5, 0.6, 0.7, 0.8, 0.9], 1, 30, "0var_heldout", TINY)
    summary = run_adaptive_sweep(spec, tmp_path / "s", "local", workers=2)
    assert [r["value"] for r in summary["rows"]] == [0.5, 0.7, 0.9]
    assert summary["adaptive"]["rounds"] == [[0.5, 0.7, 0.9]] and summary["threshold"]["estimate"] is None
    assert summary["adaptive"]["steps_trained"] == 90 and summary["adaptive"]["steps_full_grid"] == 150
    assert sorted(p.name for p in (tmp_path / "s" / "runs").iterdir()) == ["task.f=0.5", "task.f=0.7", "task.f=0.9"]
    assert "Adaptive design: 3 of the grid's 5 values run, in rounds of 3 values" in (tmp_path / "s" / "table.md").read_text()
    ckpt = tmp_path / "s" / "runs" / "task.f=0.7" / "seed-42" / "checkpoints" / "step_000030.safetensors"
    before = ckpt.stat().st_mtime_ns
    again = run_adaptive_sweep(spec, tmp_path / "s", "local", workers=2)
    assert ckpt.stat().st_mtime_ns == before and again["adaptive"]["rounds"] == summary["adaptive"]["rounds"]


def test_the_report_refuses_an_adaptive_sweep_for_c6_c7(tmp_path):
    from assign_add.reproduce import load_sweeps
    from assign_add.run import RunError

    folder = _sweep_folder(tmp_path / "f", _step_curve(7), adaptive=True)
    with pytest.raises(RunError, match="an adaptive sweep; C6/C7 read full-grid sweeps"):
        load_sweeps({"f": folder})
    full = _sweep_folder(tmp_path / "g", _step_curve(7))
    assert load_sweeps({"f": full})["f"]["rows"][7]["mean"] == 1.0

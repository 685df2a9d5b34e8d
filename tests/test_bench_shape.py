"""The step-shape fit (fixed cost per step, cost per sequence) on hand-made timings, and `bench --what shape`
end to end on tiny batches (no speed asserted)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from assign_add import bench
from assign_add.cli import app


def test_points_on_a_line_give_its_intercept_and_slope():
    # ms = 2 + 0.01 · batch: 2 ms fixed, 0.01 ms = 10 µs per sequence
    shape = bench.fit_step_shape({b: 2 + 0.01 * b for b in (256, 512, 1024, 2048)})
    assert shape.fixed_ms == pytest.approx(2.0, rel=1e-12)
    assert shape.per_seq_us == pytest.approx(10.0, rel=1e-12)
    assert shape.r2 == pytest.approx(1.0, abs=1e-12)
    assert shape.batches == (256, 512, 1024, 2048) and shape.ms[1] == pytest.approx(7.12)
    assert shape.predicted_ms(512) == pytest.approx(7.12)
    assert shape.fixed_share(512) == pytest.approx(2 / 7.12)


def test_the_fit_is_least_squares_on_scattered_points():
    # (1, 1), (2, 3), (3, 2): slope 0.5, intercept 1, r = 0.5 (worked by hand), in batches of 1000
    shape = bench.fit_step_shape({3000: 2.0, 1000: 1.0, 2000: 3.0})  # unsorted input is sorted
    assert shape.batches == (1000, 2000, 3000) and shape.ms == (1.0, 3.0, 2.0)
    assert shape.fixed_ms == pytest.approx(1.0)
    assert shape.per_seq_us == pytest.approx(0.5)  # 0.5 ms per 1000 sequences
    assert shape.r2 == pytest.approx(0.25)


def test_a_line_needs_two_batch_sizes():
    with pytest.raises(ValueError, match="two batch sizes"):
        bench.fit_step_shape({512: 3.0})


@settings(max_examples=200, deadline=None)
@given(fixed=st.floats(0.0, 100.0), slope_ms=st.floats(1e-4, 1.0),
       batches=st.lists(st.integers(1, 4096), min_size=2, max_size=8, unique=True))
def test_noiseless_points_are_recovered(fixed, slope_ms, batches):
    shape = bench.fit_step_shape({b: fixed + slope_ms * b for b in batches})
    scale = max(fixed + slope_ms * b for b in batches)  # an intercept of 0 is recovered relative to the data
    assert shape.fixed_ms == pytest.approx(fixed, rel=1e-9, abs=1e-9 * scale)
    assert shape.per_seq_us == pytest.approx(slope_ms * 1e3, rel=1e-9)
    assert shape.r2 == pytest.approx(1.0, abs=1e-9)


def test_bench_shape_prints_the_fixed_cost_line(monkeypatch):
    monkeypatch.setattr("assign_add.machine.has_c_compiler", lambda: False)  # eager only: no compile in a test
    result = CliRunner().invoke(app, ["bench", "--what", "shape", "--steps", "1", "--batches", "8,16,32",
                                      "--preset", "tiny"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "eager: fixed cost per step" in out and "of a step at batch 512" in out and "torch threads" in out
    assert "compiled: skipped" in out


@pytest.mark.parametrize("batches", ["512", "8,8", "0,16", "a,b"])
def test_bench_shape_refuses_bad_batch_sizes(batches):
    result = CliRunner().invoke(app, ["bench", "--what", "shape", "--batches", batches, "--preset", "tiny"])
    assert result.exit_code == 2 and "--batches" in result.output

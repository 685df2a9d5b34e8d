"""Essential dynamics: PCA of checkpoints' logits on hand-built paths, and the analysis on a tiny run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from assign_add.analysis.trajectory import centred_logits, principal_path, trajectory
from assign_add.config import preset
from assign_add.model import AssignAddTransformer
from assign_add.task.generator import Sampler


def test_a_straight_path_is_one_component_with_the_steps_as_coordinates():
    t = np.array([0.0, 1.0, 3.0, 6.0])
    direction = np.array([3.0, 4.0, 0.0])  # length 5
    points = t[:, None] * direction + np.array([1.0, -2.0, 7.0])
    ratio, coords = principal_path(points, 2)
    assert ratio[0] == pytest.approx(1.0) and ratio[1] == pytest.approx(0.0, abs=1e-12)
    # the coordinate along the unit direction is 5 (t − mean t), signed so the last checkpoint is ≥ 0
    assert coords[0] == pytest.approx(5 * (t - t.mean()))


def test_an_l_shaped_path_needs_two_components_and_turns_at_the_corner():
    # along e1 for 4 steps, then along e2 for 4: the PC1–PC2 path has its one corner at checkpoint 4
    points = np.array([[i, 0.0, 0.0] for i in range(5)] + [[4.0, j, 0.0] for j in range(1, 5)])
    ratio, coords = principal_path(points, 3)
    assert ratio[:2].sum() == pytest.approx(1.0) and ratio[2] == pytest.approx(0.0, abs=1e-12)
    moves = np.diff(coords[:2].T, axis=0)
    turn = [float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))) for a, b in zip(moves[:-1], moves[1:])]
    # straight (cosine 1) within each leg, a right angle (cosine 0) at the corner
    assert np.argmin(turn) + 1 == 4 and min(turn) == pytest.approx(0.0, abs=1e-9)
    assert np.allclose(np.delete(turn, 3), 1.0)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(2, 12), st.integers(1, 20)),
              elements=st.floats(-100, 100, allow_nan=False)))
def test_components_preserve_the_spread_and_are_ordered(points):
    ratio, coords = principal_path(points, 20)
    centred = points - points.mean(axis=0)
    total = (centred**2).sum()
    assert np.all(np.diff(ratio) <= 1e-12) and ratio.sum() <= 1 + 1e-9
    if total > 1e-6:  # every component kept: the coordinates carry all of the spread (the SVD is exact)
        assert (coords**2).sum() == pytest.approx(total, rel=1e-9)
    assert np.all(coords[:, -1] >= 0)


def test_centred_logits_ignore_a_shift_shared_by_a_sequence():
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=0)
    batch = Sampler(cfg.task, 1).batch(0, 16)
    base = centred_logits(model, batch)
    shift = torch.linspace(-5.0, 5.0, 16)[:, None, None]  # another shift per sequence, shared by its logits
    shifted = centred_logits(lambda tokens: model(tokens) + shift, batch)
    assert np.allclose(shifted, base, atol=1e-5)  # float32 logits of size ~1 plus shifts of 5
    assert np.allclose(base.mean(axis=1), 0.0, atol=1e-12)


def test_trajectory_of_identical_checkpoints_has_no_movement():
    cfg = preset("paper")
    model = AssignAddTransformer.from_config(cfg.model, cfg.task, seed=0)
    batch = Sampler(cfg.task, 1).batch(0, 8)
    t = trajectory([model, model, model], batch, [0, 10, 20])
    assert t.steps == [0, 10, 20] and t.sequences == 8
    assert np.allclose(t.projections, 0.0) and t.explained == [0.0] * len(t.explained)


def test_speed_is_distance_per_hundred_steps_between_checkpoints():
    from assign_add.analysis.trajectory import speeds

    points = np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 4.0], [3.0, 14.0]])
    assert speeds(points, [0, 100, 300, 1300]).tolist() == [5.0, 0.0, 1.0]  # 5 in 100, 0 in 200, 10 in 1,000

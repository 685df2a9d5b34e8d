"""Essential dynamics: the run's path through function space, seen in its top principal components.

Following the "essential dynamics" view of developmental interpretability (Hoogland et al., 2024;
Carroll et al., 2025), each checkpoint is described by what it computes on a fixed set of inputs —
its answer logits on the first :data:`SEQUENCES_PER_SET` sequences of every curated pool,
concatenated into one vector — and PCA over the checkpoints gives the few directions in which the
function moves.  Logits are centred per sequence first (a softmax cannot see a shift shared by
all of a sequence's logits).  Turns of the path in the PC plane are where the function changes
direction; the report sets them beside the accuracy phases.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import torch

from assign_add.task.generator import Batch

SEQUENCES_PER_SET = 200  # per curated pool; 10 pools x 200 x 59 logits = 118,000 numbers per checkpoint
COMPONENTS = 3  # principal components kept per checkpoint


@dataclass
class Trajectory:
    steps: list[int]
    explained: list[float]  # variance ratio of each kept component (over all components)
    projections: list[list[float]]  # [component][checkpoint]
    sequences: int
    # how fast the function moves: |logits(t_i+1) − logits(t_i)| per 100 steps between consecutive
    # checkpoints, in the full space (not only the kept components), at the interval's end step
    speed_steps: list[int]
    speed: list[float]

    def to_json(self) -> dict:
        return asdict(self)


@torch.no_grad()
def centred_logits(model: Callable[[torch.Tensor], torch.Tensor], batch: Batch) -> np.ndarray:
    """The answer logits ``[B, d_vocab_out]`` with each row's mean removed, as float64."""
    logits = model(torch.as_tensor(batch.tokens))[:, -1].double().numpy()
    return logits - logits.mean(axis=1, keepdims=True)


def principal_path(points: np.ndarray, components: int = COMPONENTS) -> tuple[np.ndarray, np.ndarray]:
    """PCA of ``points [T, F]`` (one row per checkpoint): the explained-variance ratio of the first
    ``components`` and the rows' coordinates ``[components, T]``.  Each component's sign is chosen so
    the last checkpoint's coordinate is ≥ 0 (PCA fixes a direction only up to sign)."""
    centred = points - points.mean(axis=0, keepdims=True)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    var = s**2
    total = var.sum()
    k = min(components, len(s))
    # spread below float64 rounding of the points themselves is no movement at all
    if total <= (100 * np.finfo(float).eps) ** 2 * float((points**2).sum()):
        return np.zeros(k), np.zeros((k, len(points)))
    ratio = var[:k] / total
    coords = (u[:, :k] * s[:k]).T
    signs = np.where(coords[:, -1] < 0, -1.0, 1.0)
    return ratio, coords * signs[:, None]


def speeds(points: np.ndarray, steps: list[int]) -> np.ndarray:
    """Distance between consecutive rows of ``points`` per 100 steps."""
    return np.linalg.norm(np.diff(points, axis=0), axis=1) / np.diff(np.asarray(steps, dtype=float)) * 100


def trajectory(models, batch: Batch, steps: list[int], components: int = COMPONENTS) -> Trajectory:
    """The essential-dynamics path of the checkpoints ``models`` (an iterable, loaded lazily, one per step)."""
    points = np.stack([centred_logits(m, batch).ravel() for m in models])
    ratio, coords = principal_path(points, components)
    return Trajectory(list(steps), ratio.tolist(), coords.tolist(), len(batch.answers), list(steps[1:]),
                      speeds(points, steps).tolist())

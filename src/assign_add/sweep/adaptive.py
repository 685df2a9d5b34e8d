"""Cheaper sweeps: run only the grid values that locate the threshold.

A full sweep trains every value of its grid (the authors': 20).  The threshold the verdicts read is the
smallest swept value from which the monotone fit of the mean score stays at or above the level
(:func:`~assign_add.stats.monotone_crossing`), so only the values around that crossing decide it.  The
adaptive design runs, in rounds of ``per_round`` values (one per worker):

1. the grid's two ends and evenly spaced values between them (at least 3 in all);
2. then, while the crossing of the monotone fit over the values run so far lies between two values that are
   not neighbours on the grid, the grid values that split that gap evenly;
3. it stops when the crossing sits on a run value whose run neighbour below is its grid neighbour (or the
   crossing is the grid's first value, or the fit never reaches the level).

Every value it runs is a grid value, and each value is one ordinary sweep point (all seeds), so an adaptive
sweep folder is a sweep folder with fewer values.  :func:`replay` runs the same design on a finished
full-grid sweep's scores, which shows whether it gives the grid's threshold and at what cost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from assign_add.stats import monotone_crossing

FIRST_ROUND_MIN = 3  # both ends and the middle: the fewest values that can place a crossing inside the grid


def first_values(grid: Sequence[float], per_round: int) -> list[float]:
    """The first round: the grid's ends and evenly spaced values between (``max(3, per_round)`` in all)."""
    g = sorted(grid)
    k = min(len(g), max(FIRST_ROUND_MIN, per_round))
    idx = sorted({int(round(i)) for i in np.linspace(0, len(g) - 1, k)})
    return [g[i] for i in idx]


def bracket(grid: Sequence[float], means: Mapping[float, float], level: float) -> tuple[float | None, float | None]:
    """(the run value below the crossing, the crossing) of the monotone fit over the values run so far.
    (None, crossing) when the crossing is the lowest value run; (None, None) when the fit never reaches the level."""
    xs = sorted(means)
    cross = monotone_crossing(np.asarray(xs), np.asarray([means[x] for x in xs]), level)
    if cross is None:
        return None, None
    below = [x for x in xs if x < cross]
    return (below[-1] if below else None), cross


def next_values(grid: Sequence[float], means: Mapping[float, float], level: float, per_round: int) -> list[float]:
    """The grid values to run next, given the mean score of each value run so far; [] when the threshold is
    located to one grid step (or lies outside the grid)."""
    g = sorted(grid)
    if not means:
        return first_values(g, per_round)
    low, cross = bracket(g, means, level)
    if cross is None:
        return []
    lo = g.index(low) if low is not None else -1  # the grid's first value is always run, so -1 only at a crossing there
    gap = [i for i in range(lo + 1, g.index(cross)) if g[i] not in means]
    if len(gap) > per_round:  # split the gap into per_round + 1 near-equal parts (the picks are distinct)
        gap = [gap[(j + 1) * len(gap) // (per_round + 1)] for j in range(per_round)]
    return [g[i] for i in gap]


@dataclass
class AdaptiveResult:
    """What the adaptive design ran and what it found."""

    rounds: list[list[float]]  # the values run in each round
    threshold: float | None  # the monotone crossing over the values run
    grid_size: int
    per_round: int

    @property
    def values(self) -> list[float]:
        return sorted(v for r in self.rounds for v in r)

    def to_json(self) -> dict:
        return {**asdict(self), "values": self.values, "n_values": len(self.values)}


def run_design(grid: Sequence[float], score_of: Callable[[list[float]], Mapping[float, float]], level: float,
               per_round: int, max_rounds: int = 64) -> AdaptiveResult:
    """The adaptive design against ``score_of`` (values → their mean scores): a live sweep trains them, a
    replay reads them from a finished sweep."""
    if per_round < 1:
        raise ValueError(f"per_round must be >= 1, got {per_round}")
    means: dict[float, float] = {}
    rounds: list[list[float]] = []
    for _ in range(max_rounds):
        todo = next_values(grid, means, level, per_round)
        if not todo:
            break
        rounds.append(todo)
        means.update(score_of(todo))
    _, cross = bracket(grid, means, level) if means else (None, None)
    return AdaptiveResult(rounds, cross, len(grid), per_round)


def grid_step(grid: Sequence[float]) -> float:
    """The largest gap between neighbouring grid values (the authors' grids are evenly spaced)."""
    g = np.sort(np.asarray(grid, float))
    return float(np.max(np.diff(g))) if len(g) > 1 else 0.0


def replay(grid: Sequence[float], means: Mapping[float, float], level: float, per_round: int) -> dict:
    """The adaptive design run on a finished full-grid sweep's mean scores: its threshold beside the full grid's,
    whether they agree within one grid step, and the cost of each in runs per seed."""
    missing = [v for v in grid if v not in means or not np.isfinite(means[v])]
    if missing:
        raise ValueError(f"the sweep has no score at {', '.join(f'{v:.4g}' for v in missing)}")
    xs = sorted(grid)
    full = monotone_crossing(np.asarray(xs), np.asarray([means[x] for x in xs]), level)
    result = run_design(grid, lambda vals: {v: means[v] for v in vals}, level, per_round)
    step = grid_step(grid)
    if full is None or result.threshold is None:
        same = full is None and result.threshold is None
    else:
        same = abs(full - result.threshold) <= step * (1 + 1e-9)
    return {"level": level, "per_round": per_round, "grid_threshold": full, "adaptive": result.to_json(),
            "grid_step": step, "within_one_step": bool(same), "runs_per_seed": {"grid": len(grid),
                                                                                "adaptive": len(result.values)}}

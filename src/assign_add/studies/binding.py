"""Training a run only as far as the binding question needs: in chunks, until bound or a horizon.

Shared by branch-and-replay (:mod:`assign_add.studies.branches`) and the time-to-binding survey
(:mod:`assign_add.studies.survival`): both ask only *whether and when* a run binds, so a run can stop
once it has, and only the two sets that binding and addition are read from are evaluated along the
way (every set costs about a third of a step's time; the last step still evaluates every set).
"""

from __future__ import annotations

from pathlib import Path

from assign_add.analysis.dynamics import curves_from_records, detect_phases
from assign_add.run import RunDir

BINDING_EVAL_SETS = ["0var_heldout", "1var_heldout"]
CHUNK = 500  # steps between checks of "bound yet?" (each chunk resumes from the saved state)


def binding_of(run: RunDir) -> tuple[int | None, int]:
    """(binding step or None, last evaluated step) from the run's metrics."""
    records = run.metrics()
    phases = detect_phases(curves_from_records(records))
    return phases.binding_reached, int(records[-1]["step"])


def train_until_bound(out: Path, steps: int, until_bound: bool, chunk: int = CHUNK) -> tuple[int | None, int]:
    """Resume the run at ``out`` in chunks of ``chunk`` steps up to ``steps`` (extending a finished
    run whose config says fewer), stopping early once bound with ``until_bound``; returns
    :func:`binding_of` at the end."""
    from assign_add.train.trainer import train

    run = RunDir(out)
    cfg = run.config()
    cfg.train.steps = max(steps, cfg.train.steps)
    while True:
        bound_at, reached = binding_of(run)
        if reached >= cfg.train.steps or (until_bound and bound_at is not None):
            return bound_at, reached
        train(cfg, out, resume=True, stop_after=min(reached + chunk, cfg.train.steps))

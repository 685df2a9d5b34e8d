"""Sweeps: many ordinary runs over one swept config field and several seeds.

``sweeps/NAME/`` holds ``spec.json``, one run directory per point
(``runs/<key>=<value>/seed-<seed>``), ``sweep.json`` (per point and per value: the score, mean ± sd
over seeds, the score curve and convergence; the threshold), ``table.md``, ``figure.png|html``
(score against the swept value) and ``curves.png|html`` (score against training step).  A sweep
resumes by skipping finished points and resuming interrupted ones; it may be extended with more
values or seeds (the other settings must match).

Layout: :mod:`.spec` (what to run, presets) · :mod:`.backends` (where it runs, progress) ·
:mod:`.summary` (scores, convergence, table, figures) · :mod:`.threshold` (estimators).
"""

from __future__ import annotations

import json
from pathlib import Path

from assign_add.config import ConfigError
from assign_add.io import atomic_write_json
from assign_add.run import RunError, check_folder_out
from assign_add.sweep.backends import Progress, default_workers, run_local, run_ray
from assign_add.sweep.spec import SweepSpec
from assign_add.sweep.summary import summarize, write_outputs


def prepare_sweep_dir(spec: SweepSpec, root: Path) -> None:
    """Check ``root`` can hold this sweep (a one-line error otherwise) and write ``spec.json``."""
    root = Path(root)
    check_folder_out(root, "sweep", {"spec.json", "sweep.json", "table.md", "runs"}, r"[\w.=-]+\.(png|html)")
    spec_path = root / "spec.json"
    if spec_path.is_file():
        try:
            old = json.loads(spec_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RunError(f"{spec_path}: corrupt (not JSON); delete it to re-create it from this command") from None
        if not isinstance(old, dict) or not spec.same_runs(old):  # more values or seeds are fine
            raise ConfigError("--out", f"{root} holds a sweep with another specification; choose another --out")
    atomic_write_json(spec_path, spec.to_json())


def train_points(spec: SweepSpec, root: Path, backend: str = "local", workers: int | None = None,
                 address: str | None = None, progress: Progress | None = None) -> dict:
    """Train (or resume) every point of ``spec`` into ``root`` and summarise it, writing no summary files."""
    root = Path(root)
    if backend not in ("local", "ray"):
        raise ConfigError("--backend", f"unknown backend {backend!r}; choose local or ray")
    prepare_sweep_dir(spec, root)
    workers = workers or default_workers()
    if backend == "local":
        run_local(spec, root, workers, progress)
    else:
        run_ray(spec, root, address, workers, progress)
    return summarize(spec, root)


def run_sweep(spec: SweepSpec, root: Path, backend: str = "local", workers: int | None = None,
              address: str | None = None, progress: Progress | None = None) -> dict:
    summary = train_points(spec, root, backend, workers, address, progress)
    write_outputs(spec, Path(root), summary)
    return summary


def run_adaptive_sweep(spec: SweepSpec, root: Path, backend: str = "local", workers: int | None = None,
                       address: str | None = None, progress: Progress | None = None) -> dict:
    """The adaptive design (:mod:`.adaptive`) over ``spec.values`` as the grid: each round trains its values
    (every seed) as an ordinary sweep into ``root``, then reads their mean scores to choose the next round.
    Re-running with the same ``workers`` resumes: finished points are read, not retrained, so the same rounds are
    chosen again.  ``sweep.json`` and the figures are written once, when the design has stopped, so an interrupted
    adaptive sweep never reads as a finished sweep of fewer values."""
    import dataclasses

    from assign_add.sweep.adaptive import run_design
    from assign_add.sweep.spec import THRESHOLD_ACC

    root = Path(root)
    workers = workers or default_workers()
    grid = sorted(spec.values)
    run: list[float] = []

    def score_of(values: list[float]) -> dict[float, float]:
        run.extend(values)
        summary = train_points(dataclasses.replace(spec, values=sorted(run)), root, backend, workers, address, progress)
        missing = [u for u in summary["unfinished"] if u["value"] in values]
        if missing:
            where = ", ".join(spec.point_name(u["value"], u["seed"]) for u in missing)
            raise RunError(f"{root}: {where} did not finish (see its train.log); run the same command again")
        return {r["value"]: r["mean"] for r in summary["rows"] if r["value"] in values}

    result = run_design(grid, score_of, THRESHOLD_ACC, workers)
    final = dataclasses.replace(spec, values=result.values)
    summary = summarize(final, root)
    summary["adaptive"] = {**result.to_json(), "grid": grid, "level": THRESHOLD_ACC,
                           "steps_trained": len(result.values) * len(spec.seeds) * spec.steps,
                           "steps_full_grid": len(grid) * len(spec.seeds) * spec.steps}
    write_outputs(final, root, summary)
    return summary

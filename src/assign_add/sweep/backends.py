"""Where a sweep's points run: a local process pool or Ray tasks, with combined progress.

Both backends call :func:`run_point` (train, resume or reuse one point's run directory), so their
results are identical.  ``local`` is a process pool, one torch thread per worker, whose workers
exit when the sweep process is gone; ``ray`` submits the same function to a Ray cluster (any
``ray.init(address=...)``) or to a local Ray instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from assign_add.config import ConfigError
from assign_add.machine import cpu_cores
from assign_add.parallel import POLL_SECONDS, run_pool
from assign_add.run import RunDir
from assign_add.sweep.spec import SweepSpec


def run_point(spec_json: dict, root: str, value: float, seed: int) -> dict:
    """Train, resume, continue or reuse one point; returns where it stands.  Runs in a worker.

    A point folder holding the same run with fewer ``train.steps`` (e.g. copied from a finished
    sweep) is continued, which equals training it from scratch for the longer schedule (constant
    learning rate; the batch for a step depends only on seed and step).  A folder holding another
    run is replaced.
    """
    import torch

    from assign_add.run import config_differences
    from assign_add.train.resume import RESUMABLE_CHANGES
    from assign_add.train.trainer import train

    torch.set_num_threads(1)
    spec = SweepSpec.from_json(spec_json)
    cfg = spec.point_config(value, seed)
    out = Path(root) / spec.point_name(value, seed)
    run = RunDir(out)
    if not run.exists():
        train(cfg, out)
    else:
        diff = config_differences(run.config(), cfg)
        if diff or run.status().get("state") != "complete":
            reached = int(run.status().get("step", 0))
            resumable = set(diff) <= RESUMABLE_CHANGES and reached <= cfg.train.steps
            train(cfg, out, resume=resumable, force=not resumable)
    return {"value": value, "seed": seed, "step": int(run.status().get("step", 0))}


@dataclass
class SweepProgress:
    """Combined progress of all points: training steps done (finished points count in full)."""

    steps_done: int
    steps_total: int
    points_done: int
    points_total: int


Progress = Callable[[SweepProgress], None]


def poll_progress(spec: SweepSpec, root: Path, results: list[dict]) -> SweepProgress:
    """Finished points (``results``) count in full; the others by their ``status.json`` step."""
    finished = {(r["value"], r["seed"]) for r in results}
    points = spec.points()
    done = 0
    for value, seed in points:
        if (value, seed) in finished:
            done += spec.steps
        else:
            done += min(int(RunDir(Path(root) / spec.point_name(value, seed)).status().get("step", 0)), spec.steps)
    return SweepProgress(done, spec.steps * len(points), len(finished), len(points))


def run_local(spec: SweepSpec, root: Path, workers: int, progress: Progress | None = None) -> list[dict]:
    """Every point in a local process pool (one torch thread per run)."""
    poll = (lambda results: progress(poll_progress(spec, root, results))) if progress else None  # noqa: E731
    jobs = [(run_point, (spec.to_json(), str(root), v, s)) for v, s in spec.points()]
    return run_pool(jobs, workers, threads=1, poll=poll)


def run_ray(spec: SweepSpec, root: Path, address: str | None, workers: int, progress: Progress | None = None) -> list[dict]:
    try:
        import ray
    except ImportError:
        raise ConfigError("--backend", "ray is not installed: pip install 'assign-add[ray]'") from None
    started = not ray.is_initialized()
    if started:
        kwargs = {"address": address} if address else {
            "num_cpus": workers, "include_dashboard": False, "object_store_memory": 80 * 2**20,
            "log_to_driver": False}
        ray.init(**kwargs)
    try:
        remote = ray.remote(num_cpus=1)(run_point)
        refs = [remote.remote(spec.to_json(), str(Path(root).resolve()), v, s) for v, s in spec.points()]
        results: list[dict] = []
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_SECONDS)
            results.extend(ray.get(done))
            if progress:  # on a remote cluster only finished points are visible here
                progress(poll_progress(spec, root, results))
        return results
    finally:
        if started:
            ray.shutdown()


def default_workers() -> int:
    return max(1, cpu_cores())

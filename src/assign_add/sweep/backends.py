"""Where a sweep's points run: a local process pool or Ray tasks, with combined progress.

Both backends call :func:`run_point` (train, resume or reuse one point's run directory), so their
results are identical.  ``local`` is a process pool, one torch thread per worker, whose workers
exit when the sweep process is gone; ``ray`` submits the same function to a Ray cluster (any
``ray.init(address=...)``) or to a local Ray instance.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from assign_add.config import ConfigError
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
    from assign_add.train.trainer import RESUMABLE_CHANGES, train

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
POLL_SECONDS = 2.0


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


def watch_parent(parent_pid: int, on_orphan: Callable[[], None] = lambda: os._exit(1),
                 interval: float = 1.0) -> threading.Thread:
    """Call ``on_orphan`` once the process that started this worker is gone.

    A pool worker whose sweep was killed (SIGTERM, OOM killer) would otherwise train on unobserved;
    its run directory stays resumable because every file is written atomically.
    """
    def loop() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        on_orphan()

    thread = threading.Thread(target=loop, name="watch-parent", daemon=True)
    thread.start()
    return thread


def _worker_init(parent_pid: int) -> None:
    watch_parent(parent_pid)


def run_local(spec: SweepSpec, root: Path, workers: int, progress: Progress | None = None) -> list[dict]:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    results: list[dict] = []
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                               initializer=_worker_init, initargs=(os.getpid(),))
    try:
        pending = {pool.submit(run_point, spec.to_json(), str(root), v, s) for v, s in spec.points()}
        while pending:
            done, pending = wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
            results.extend(fut.result() for fut in done)
            if progress:
                progress(poll_progress(spec, root, results))
    except BaseException:
        # interrupted or a point failed: stop the other workers now (their runs stay resumable)
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        raise
    pool.shutdown(wait=True)
    return results


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
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))

"""Accuracy and loss of saved checkpoints on the curated sets, cached in ``RUN/evals.jsonl``.

Imported runs (the authors' checkpoints) have no training metrics; this gives them the same
per-set accuracies that training logs, computed from the checkpoints themselves.
"""

from __future__ import annotations

import contextlib

from assign_add.io import append_jsonl, read_jsonl
from assign_add.lock import run_lock
from assign_add.run import RunDir, RunError
from assign_add.task.evalsets import live
from assign_add.train.evaluate import evaluate


def evaluate_checkpoints(run: RunDir, steps: list[int] | None = None, sets: list[str] | None = None,
                         lock: bool = True, write: bool = True) -> list[dict]:
    """One record ``{"step", "acc", "loss"}`` per checkpoint, computing only what is not cached.

    ``lock=False`` when the caller already holds the run's lock.  ``write=False`` never writes and
    never takes the lock (readers: a notebook, the explorer of a run that may be training): records
    already cached are used, the rest is computed in memory and forgotten.
    """
    available = run.checkpoint_steps()
    steps = available if steps is None else steps
    missing = [s for s in steps if s not in available]
    if missing:
        raise RunError(f"{run.root} has no checkpoint at step(s) {', '.join(map(str, missing))}")
    all_sets = run.eval_sets()
    names = list(all_sets) if sets is None else sets
    unknown = [n for n in names if n not in all_sets]
    if unknown:
        raise RunError(f"unknown set(s) {', '.join(unknown)}; known: {', '.join(all_sets)}")
    cache = {r["step"]: r for r in read_jsonl(run.evals_path)}  # later records of a step extend earlier ones
    todo_steps = [s for s in steps if any(n not in cache.get(s, {}).get("acc", {}) for n in names)]
    if todo_steps:
        with run_lock(run.root) if lock and write else contextlib.nullcontext():  # one writer of evals.jsonl at a time
            for step in todo_steps:
                rec = cache.get(step, {"step": step, "acc": {}, "loss": {}})
                todo = {n: all_sets[n] for n in names if n not in rec["acc"]}
                res = evaluate(run.load_model(step), todo)
                rec["acc"].update(res["acc"])
                rec["loss"].update(res["loss"])
                if write:
                    append_jsonl(run.evals_path, rec)
                cache[step] = rec
    out = []
    for step in steps:
        rec = cache[step]
        out.append({"step": step, "acc": {n: rec["acc"][n] for n in names}, "loss": {n: rec["loss"][n] for n in names}})
    return out


def accuracy_records(run: RunDir, steps: list[int], write: bool = True, sets: list[str] | None = None
                     ) -> tuple[list[dict], str]:
    """(per-step records, their source): the training metrics when the run has them, else the
    checkpoints in ``steps`` evaluated on ``sets`` (default: every live set), cached in ``evals.jsonl``
    only with ``write``.  The one place that decides where a run's curves come from."""
    metrics = run.metrics()
    if metrics:
        return metrics, "metrics.jsonl"
    names = list(live(run.eval_sets())) if sets is None else sets
    return evaluate_checkpoints(run, steps, names, lock=False, write=write), "checkpoints"

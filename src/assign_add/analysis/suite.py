"""Run the registered analyses (:mod:`assign_add.analysis.registry`) on a run directory:
``RUN/analysis.json`` and ``RUN/figures/``.

Every checkpoint is loaded once and its probe-batch activations computed once for all the
per-checkpoint analyses; then each analysis's whole-run part.  ``analysis.json`` records the key of
its inputs (:func:`inputs_key`); :func:`is_current` says whether a saved analysis can be reused.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from pathlib import Path
from typing import Callable

import numpy as np

import assign_add
from assign_add.analysis import dynamics, spike
from assign_add.analysis.registry import INPUTS_FILE, REGISTRY, Context, checkpoint_view, probe_batch
from assign_add.config import ConfigError
from assign_add.io import atomic_write_json
from assign_add.lock import run_lock
from assign_add.run import RunDir, RunError, open_run
from assign_add.task.vocab import Vocab
from assign_add.train.checkpoint_eval import accuracy_records, evaluate_checkpoints  # noqa: F401 (re-exported)

ANALYSES = tuple(REGISTRY)

Progress = Callable[[str, int, int], None]

__all__ = ["ANALYSES", "analyze", "measure", "inputs_key", "is_current", "load_analysis", "probe_batch"]


# The package's code an analysis runs: the analyses, the model, the task, evaluation and the run folder.
# The report, the CLI, the studies, sweeps and the rest read analyses but do not compute them, so a change
# there does not make a saved analysis stale.
ANALYSIS_CODE = ("analysis", "model", "task", "train", "config.py", "run.py", "io.py", "lock.py", "charts.py",
                 "stats.py", "provenance.py", "machine.py", "__init__.py")


@functools.cache
def code_digest() -> str:
    """SHA-256 of the source files an analysis runs (:data:`ANALYSIS_CODE`): an analysis computed by other
    code is not reused (a development checkout changes code without changing the version)."""
    root = Path(assign_add.__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] not in ANALYSIS_CODE:
            continue
        h.update(str(rel).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def inputs_key(run: RunDir, only: list[str], steps: list[int]) -> str:
    """SHA-256 over what an analysis reads: the package version and source, the analyses and steps asked
    for, the run's config, partitions, evaluation sets, metrics, saved sampled batches and checkpoints."""
    h = hashlib.sha256(json.dumps({"version": assign_add.__version__, "code": code_digest(), "only": sorted(only),
                                   "steps": steps}).encode())
    files = [run.config_path, run.partitions_path, run.evalsets_path, run.metrics_path, run.root / INPUTS_FILE]
    files += [run.checkpoint_path(s) for s in steps]
    for path in files:
        h.update(path.name.encode())
        if path.is_file():
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def is_current(run: RunDir, only: list[str] | None = None, steps: list[int] | None = None) -> bool:
    """Whether ``analysis.json`` (and its figures) were computed from exactly the run's present inputs."""
    path = run.root / "analysis.json"
    if not path.is_file() or not (run.root / "figures").is_dir():
        return False
    saved = json.loads(path.read_text()).get("inputs_key")
    only = list(ANALYSES) if not only else only
    return saved == inputs_key(run, only, run.checkpoint_steps() if steps is None else sorted(steps))


def analyze(
    run: RunDir, only: list[str] | None = None, steps: list[int] | None = None, progress: Progress | None = None
) -> dict:
    """Every analysis in ``only`` (default all), saved as ``analysis.json`` with its figures; holds the
    run's lock while it reads and writes."""
    with run_lock(run.root):
        out = _measure(run, only, steps, progress, write=True)
        out["inputs_key"] = inputs_key(run, only or list(ANALYSES), out["steps"])
        from assign_add.analysis.figures import write_figures

        write_figures(out, run.root / "figures")
        atomic_write_json(run.root / "analysis.json", _clean(out))  # last: a saved analysis has its figures
        return out


def measure(
    run: RunDir | str | Path, only: list[str] | None = None, steps: list[int] | None = None,
    progress: Progress | None = None,
) -> dict:
    """The same dict ``analyze`` saves, computed in memory: never writes a byte into the run and never
    takes its lock (a notebook, a script, a run that is still training).  What ``analyze`` would cache
    (checkpoint accuracies, the gradient analysis's sampled sequences) is read when present and
    otherwise computed and forgotten."""
    run = run if isinstance(run, RunDir) else open_run(Path(run))
    return _clean(_measure(run, only, steps, progress, write=False))


def _context(run: RunDir, steps: list[int] | None, write: bool) -> Context:
    cfg = run.config()
    available = run.checkpoint_steps()
    if not available:
        raise RunError(f"{run.root} has no checkpoints to analyse")
    steps = available if steps is None else sorted(steps)
    missing = [s for s in steps if s not in available]
    if missing:
        raise RunError(f"{run.root} has no checkpoint at step(s) {', '.join(map(str, missing))}")
    sets = run.eval_sets()
    records, origin = accuracy_records(run, steps, write)
    curves = dynamics.curves_from_records(records)
    return Context(run=run, cfg=cfg, vocab=Vocab.from_task(cfg.task), steps=steps, sets=sets, probe=probe_batch(sets),
                   records=records, records_source=origin, curves=curves, phases=dynamics.detect_phases(curves),
                   write=write)


def _measure(run: RunDir, only: list[str] | None, steps: list[int] | None, progress: Progress | None,
             write: bool) -> dict:
    only = list(ANALYSES) if not only else only
    unknown = [a for a in only if a not in ANALYSES]
    if unknown:
        raise ConfigError("--only", f"unknown analysis {', '.join(unknown)}; choose from {', '.join(ANALYSES)}")
    t0 = time.perf_counter()
    ctx = _context(run, steps, write)
    tick = progress or (lambda *_: None)
    chosen = [REGISTRY[name] for name in ANALYSES if name in only]  # registry order
    out: dict = {"run": str(run.root), "source": run.status().get("source"), "steps": ctx.steps, "final_step": ctx.final}
    each = [a for a in chosen if a.each is not None]
    for a in chosen:
        out[a.name] = {"by_step": {}} if a.each is not None else {}
    for i, step in enumerate(ctx.steps if each else []):
        view = checkpoint_view(step, ctx.run.load_model(step), ctx)
        for a in each:
            out[a.name]["by_step"][str(step)] = a.each(view, ctx)
        tick("checkpoints", i + 1, len(ctx.steps))
    for a in chosen:
        if a.finish is not None:
            a.finish(ctx, out[a.name])
            tick(a.name, 1, 1)
    if "dynamics" in out and each:
        table = spike.spike_table(out)
        out["spike"] = table.to_json() if table is not None else None
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def _clean(obj):
    """JSON-safe: NaN -> None, numpy scalars -> Python."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def load_analysis(run: RunDir) -> dict:
    path = Path(run.root) / "analysis.json"
    if not path.is_file():
        raise RunError(f"{run.root} has no analysis.json; run `assign-add analyze {run.root}` first")
    return json.loads(path.read_text())

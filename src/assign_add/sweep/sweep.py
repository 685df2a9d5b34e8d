"""Sweeps: many ordinary runs over one swept config field and several seeds.

``sweeps/NAME/`` holds ``spec.json``, one run directory per point
(``runs/<key>=<value>/seed-<seed>``), ``sweep.json`` (per point and per value: the score, mean ± sd
over seeds), ``table.md``, the threshold estimate and ``figure.png``/``figure.html``.  A sweep
resumes by skipping finished points and resuming interrupted ones.

Backends: ``local`` (a process pool, one torch thread per worker) and ``ray`` (Ray tasks on an
existing cluster, or a local Ray instance).  Both run :func:`run_point`, so their results are
identical.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from assign_add import config as config_mod
from assign_add.config import ConfigError, RunConfig, preset
from assign_add.io import atomic_write_json, atomic_write_text
from assign_add.run import RunDir
from assign_add.task.generator import training_type_probs

PRESETS = {
    # the authors' f sweep: training-pair fraction, scored on 0-var held-out accuracy
    "f": {"param": "task.f", "values": [round(float(v), 3) for v in np.linspace(0.06, 0.99, 20)],
          "score": "0var_heldout_all", "steps": 10_000, "paper_threshold": 0.25, "chance": 1 / 59,
          "overrides": ["train.compile=true"]},
    # the authors' r sweep: kept fraction of 2-var rows at f = 0.7, scored on the exhaustive 2-var union
    "r": {"param": "task.r", "values": [round(float(v), 3) for v in np.linspace(0.01, 0.99, 20)],
          "score": "2var_union", "steps": 20_000, "paper_threshold": 0.2, "chance": 1 / 59,
          "overrides": ["train.compile=true"]},
}


@dataclass
class SweepSpec:
    param: str
    values: list[float]
    seeds: list[int]
    steps: int
    score: str
    overrides: list[str] = field(default_factory=list)
    paper_threshold: float | None = None
    chance: float = 0.0
    eval_every: int = 500

    def point_config(self, value: float, seed: int) -> RunConfig:
        items = [f"train.steps={self.steps}", f"train.eval_every={self.eval_every}", "train.threads=1",
                 *self.overrides, f"{self.param}={value}", f"train.seed={seed}"]
        return config_mod.validate(config_mod.apply_overrides(preset("paper"), items))

    def point_dir(self, root: Path, value: float, seed: int) -> Path:
        return Path(root) / "runs" / f"{self.param}={value}" / f"seed-{seed}"

    def points(self) -> list[tuple[float, int]]:
        return [(v, s) for v in self.values for s in self.seeds]


def make_spec(preset_name: str | None, param: str | None, values: list[float] | None, seeds: int, steps: int | None,
              score: str | None, overrides: list[str]) -> SweepSpec:
    if preset_name is not None:
        if preset_name not in PRESETS:
            raise ConfigError("--preset", f"unknown sweep preset {preset_name!r}; choose {', '.join(PRESETS)}")
        p = PRESETS[preset_name]
        param, values = param or p["param"], values or p["values"]
        score, steps = score or p["score"], steps or p["steps"]
        paper, chance = p["paper_threshold"], p["chance"]
        overrides = [*p["overrides"], *overrides]  # the user's overrides come last and win
    else:
        if not param or not values:
            raise ConfigError("--param", "give --param and --values, or a --preset (f or r)")
        paper, chance = None, 0.0
    if seeds < 1:
        raise ConfigError("--seeds", f"must be >= 1, got {seeds}")
    spec = SweepSpec(param, list(values), [42 + i for i in range(seeds)], steps or 10_000, score or "0var_heldout_all",
                     list(overrides), paper, chance)
    for v in spec.values:  # validate every point's config before running anything
        spec.point_config(v, spec.seeds[0])
    return spec


def run_point(spec_json: dict, root: str, value: float, seed: int) -> dict:
    """Train (or resume, or reuse) one point and return its final metrics.  Runs in a worker."""
    import torch

    from assign_add.train.trainer import train

    torch.set_num_threads(1)
    spec = SweepSpec(**spec_json)
    cfg = spec.point_config(value, seed)
    out = spec.point_dir(Path(root), value, seed)
    run = RunDir(out)
    if not (run.exists() and run.status().get("state") == "complete" and run.config() == cfg):
        train(cfg, out, resume=run.exists() and run.config() == cfg, force=run.exists() and run.config() != cfg)
    final = run.metrics()[-1]
    return {"value": value, "seed": seed, "step": final["step"], "score": final["acc"].get(spec.score),
            "acc": final["acc"], "two_var_share": training_type_probs(cfg.task)[3], "time": final["time"]}


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
            done += min(int(RunDir(spec.point_dir(root, value, seed)).status().get("step", 0)), spec.steps)
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
        pending = {pool.submit(run_point, asdict(spec), str(root), v, s) for v, s in spec.points()}
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
        refs = [remote.remote(asdict(spec), str(Path(root).resolve()), v, s) for v, s in spec.points()]
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


def aggregate(spec: SweepSpec, results: list[dict]) -> dict:
    from assign_add.sweep.threshold import estimate_threshold

    by_value: dict[float, list[dict]] = {}
    for r in results:
        by_value.setdefault(r["value"], []).append(r)
    rows = []
    for v in spec.values:
        rs = sorted(by_value.get(v, []), key=lambda r: r["seed"])
        scores = [r["score"] for r in rs if r["score"] is not None]
        rows.append({
            "value": v,
            "two_var_share": rs[0]["two_var_share"] if rs else None,
            "mean": float(np.mean(scores)) if scores else None,
            "sd": float(np.std(scores, ddof=1)) if len(scores) > 1 else (0.0 if scores else None),
            "per_seed": {str(r["seed"]): r["score"] for r in rs},
        })
    grid = np.full((len(spec.seeds), len(spec.values)), np.nan)
    for r in results:
        if r["score"] is not None:
            grid[spec.seeds.index(r["seed"]), spec.values.index(r["value"])] = r["score"]
    thr = estimate_threshold(np.asarray(spec.values), grid, level=0.9, lo=spec.chance)
    return {"spec": asdict(spec), "rows": rows, "threshold": thr.to_json(), "points": sorted(
        results, key=lambda r: (r["value"], r["seed"]))}


def write_outputs(spec: SweepSpec, root: Path, summary: dict) -> None:
    from assign_add.analysis.charts import Line, render
    from assign_add.sweep.threshold import logistic

    atomic_write_json(root / "sweep.json", summary)
    lines = [f"| {spec.param} | 2-var share | {spec.score} mean | sd | per seed |", "|---|---|---|---|---|"]
    for row in summary["rows"]:
        fmt = lambda v: "—" if v is None else f"{v:.4f}"  # noqa: E731
        per = ", ".join(f"{k}: {fmt(v)}" for k, v in row["per_seed"].items())
        lines.append(f"| {row['value']} | {fmt(row['two_var_share'])} | {fmt(row['mean'])} | {fmt(row['sd'])} | {per} |")
    thr = summary["threshold"]
    if thr["estimate"] is not None:
        lines += ["", f"Threshold (fitted logistic crosses {thr['level']}): {thr['estimate']:.3f} "
                      f"[{thr['low'] if thr['low'] is None else round(thr['low'], 3)}, "
                      f"{thr['high'] if thr['high'] is None else round(thr['high'], 3)}] ({thr['method']}); "
                      f"linear interpolation of the mean: {thr['interpolated']}; paper: {spec.paper_threshold}"]
    atomic_write_text(root / "table.md", "\n".join(lines) + "\n")
    xs = spec.values
    series = {f"seed {s}": [row["per_seed"].get(str(s)) for row in summary["rows"]] for s in spec.seeds}
    series["mean"] = [row["mean"] for row in summary["rows"]]
    markers = {}
    if thr["estimate"] is not None:  # the fitted logistic, drawn at the swept values
        series["logistic fit"] = list(logistic(np.asarray(xs, dtype=float), thr["x0"], thr["scale"], spec.chance))
        markers[f"threshold {thr['estimate']:.2f}"] = thr["estimate"]
    if spec.paper_threshold is not None:
        markers[f"paper {spec.paper_threshold}"] = spec.paper_threshold
    chart = Line(f"{spec.score} vs {spec.param}", xs, {k: [np.nan if v is None else v for v in vals]
                                                      for k, vals in series.items()},
                 xlabel=spec.param, ylabel=spec.score, markers=markers, ylim=(0, 1.02))
    render(chart, root, "figure")


def run_sweep(spec: SweepSpec, root: Path, backend: str = "local", workers: int | None = None,
              address: str | None = None, progress: Progress | None = None) -> dict:
    root = Path(root)
    spec_path = root / "spec.json"
    if spec_path.is_file():
        old = json.loads(spec_path.read_text())
        if old != asdict(spec):
            raise ConfigError("--out", f"{root} holds a sweep with another specification; choose another --out")
    atomic_write_json(spec_path, asdict(spec))
    workers = workers or default_workers()
    if backend == "local":
        results = run_local(spec, root, workers, progress)
    elif backend == "ray":
        results = run_ray(spec, root, address, workers, progress)
    else:
        raise ConfigError("--backend", f"unknown backend {backend!r}; choose local or ray")
    summary = aggregate(spec, results)
    write_outputs(spec, root, summary)
    return summary


def parse_values(text: str) -> list[float]:
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError("--values", f"expected comma-separated numbers, got {text!r}") from None
    if not vals:
        raise ConfigError("--values", "no values given")
    return vals

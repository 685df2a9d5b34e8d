"""Sweeps: many ordinary runs over one swept config field and several seeds.

``sweeps/NAME/`` holds ``spec.json``, one run directory per point
(``runs/<key>=<value>/seed-<seed>``), ``sweep.json`` (per point and per value: the score, mean ± sd
over seeds), ``table.md``, the threshold estimate and ``figure.png``/``figure.html``.  A sweep
resumes by skipping finished points and resuming interrupted ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from assign_add.config import ConfigError
from assign_add.io import atomic_write_json, atomic_write_text
from assign_add.sweep.backends import Progress, default_workers, run_local, run_ray
from assign_add.sweep.spec import SweepSpec


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
    return {"spec": spec.to_json(), "rows": rows, "threshold": thr.to_json(), "points": sorted(
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
        if not spec.same_runs(old):
            raise ConfigError("--out", f"{root} holds a sweep with another specification; choose another --out")
    atomic_write_json(spec_path, spec.to_json())
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

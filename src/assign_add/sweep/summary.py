"""A sweep's result, read from its run directories: scores, convergence, threshold, table, figures.

Everything here reads the saved runs (``runs/<param>=<value>/seed-<seed>/metrics.jsonl``), so a
sweep can be re-summarised at any time, also while it is unfinished (unfinished points are listed
and left out).  Convergence: each point's score curve is recorded every ``spec.eval_every``
steps; the table shows the score at one third, two thirds and the end of training, and a point
whose score still rose by more than :data:`CONVERGENCE_MARGIN` over the last third is "not
converged".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from assign_add.analysis.criteria import BINDING_ACC, BINDING_SET
from assign_add.config import ConfigError
from assign_add.io import atomic_write_json, atomic_write_text
from assign_add.run import RunDir
from assign_add.stats import logistic
from assign_add.sweep.spec import THRESHOLD_ACC, SweepSpec
from assign_add.sweep.threshold import estimate_threshold
from assign_add.task.generator import training_type_probs

# A point still rising by more than 2 accuracy points over the last third of its training is not
# converged.  Basis: the exhaustive sets have >= 1,045 sequences, so a fixed model's score moves
# by < 0.1 % between evaluations from rounding alone; 2 points is 20x that, and small against the
# 10-point gap between a converged 0.9 and the chance-to-1 rise that the threshold locates.
CONVERGENCE_MARGIN = 0.02
# The points that decide a threshold: the swept values just below it (they are the ones that
# would move it if they rose further).  With no crossing, the highest values below the level.
NEAR_POINTS = 2
LEVELS = (0.5, 0.8, 0.9)  # accuracy levels at which the threshold is also read


@dataclass
class PointResult:
    value: float
    seed: int
    score: float
    curve: list[tuple[int, float]]  # (step, score) every eval_every steps
    at_third: float | None
    at_two_thirds: float | None
    rise_last_third: float | None
    converged: bool
    two_var_share: float
    seconds: float
    bound: bool | None = None  # 1-var held-out ever ≥ the binding level (None: not evaluated)

    def to_json(self) -> dict:
        return dict(self.__dict__)


def score_at(curve: list[tuple[int, float]], step: int) -> float | None:
    """The score of the last evaluation at or before ``step``."""
    before = [s for t, s in curve if t <= step]
    return before[-1] if before else None


def read_point(spec: SweepSpec, root: Path, value: float, seed: int) -> PointResult | None:
    """The finished point's result, or None when it has not finished."""
    run = RunDir(Path(root) / spec.point_name(value, seed))
    if not run.exists() or run.status().get("state") != "complete":
        return None
    records = run.metrics()
    curve = [(int(r["step"]), float(r["acc"][spec.score])) for r in records if spec.score in r.get("acc", {})]
    if not curve or curve[-1][0] != spec.steps:
        return None
    third, two_thirds = score_at(curve, spec.steps // 3), score_at(curve, 2 * spec.steps // 3)
    final = curve[-1][1]
    rise = None if two_thirds is None else final - two_thirds
    heldout = [r["acc"][BINDING_SET] for r in records if BINDING_SET in r.get("acc", {})]
    return PointResult(value, seed, final, curve, third, two_thirds, rise,
                       rise is None or rise <= CONVERGENCE_MARGIN,
                       training_type_probs(spec.point_config(value, seed).task)[3], float(records[-1]["time"]),
                       max(heldout) >= BINDING_ACC if heldout else None)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarize(spec: SweepSpec, root: Path) -> dict:
    """Per value: mean ± sd over seeds, each seed, convergence; the threshold; what is unfinished."""
    points = {(v, s): read_point(spec, root, v, s) for v, s in spec.points()}
    rows = []
    for v in spec.values:
        res = [p for s in spec.seeds if (p := points[(v, s)]) is not None]
        scores = [p.score for p in res]
        rows.append({
            "value": v,
            "two_var_share": training_type_probs(spec.point_config(v, spec.seeds[0]).task)[3],
            "n_seeds": len(res),
            "mean": _mean(scores),
            "sd": float(np.std(scores, ddof=1)) if len(scores) > 1 else (0.0 if scores else None),
            "per_seed": {str(p.seed): p.score for p in res},
            "at_third": _mean([p.at_third for p in res if p.at_third is not None]),
            "at_two_thirds": _mean([p.at_two_thirds for p in res if p.at_two_thirds is not None]),
            "max_rise_last_third": max((p.rise_last_third for p in res if p.rise_last_third is not None), default=None),
            "converged": all(p.converged for p in res) if res else None,
            "unbound_seeds": [p.seed for p in res if p.bound is False],
        })
    grid = np.full((len(spec.seeds), len(spec.values)), np.nan)
    for (v, s), p in points.items():
        if p is not None:
            grid[spec.seeds.index(s), spec.values.index(v)] = p.score
    thr = estimate_threshold(np.asarray(spec.values), grid, level=THRESHOLD_ACC).to_json()
    # the same threshold read at other levels, so a verdict does not hang on the choice of 90 %
    by_level = {f"{lv:g}": estimate_threshold(np.asarray(spec.values), grid, level=lv, n_boot=200).to_json()
                for lv in LEVELS}
    near = near_values(rows, thr["estimate"])
    unconverged = [r["value"] for r in rows if r["value"] in near and r["converged"] is False]
    unfinished = [{"value": v, "seed": s} for (v, s), p in points.items() if p is None]
    return {
        "spec": spec.to_json(),
        "protocol": protocol_line(spec),
        "rows": rows,
        "threshold": thr,
        "thresholds_by_level": {lv: {k: t[k] for k in ("estimate", "low", "high")} for lv, t in by_level.items()},
        "convergence": {"margin": CONVERGENCE_MARGIN, "near_values": near, "unconverged_near": unconverged,
                        "unconverged": [r["value"] for r in rows if r["converged"] is False]},
        "unfinished": unfinished,
        "points": [p.to_json() for p in points.values() if p is not None],
    }


def near_values(rows: list[dict], estimate: float | None) -> list[float]:
    """The :data:`NEAR_POINTS` swept values just below the threshold (or below the level if none)."""
    done = [r for r in rows if r["mean"] is not None]
    below = [r["value"] for r in done if (estimate is None or r["value"] < estimate)]
    if estimate is None:
        below = [r["value"] for r in done if r["mean"] < THRESHOLD_ACC]
    return sorted(below)[-NEAR_POINTS:]


def protocol_line(spec: SweepSpec) -> str:
    vals = spec.values
    return (f"{spec.protocol}. {spec.param} over {len(vals)} values {min(vals):.4g}–{max(vals):.4g}, "
            f"{len(spec.seeds)} seed(s) {', '.join(map(str, spec.seeds))}, {spec.steps:,} steps per run, "
            f"score: {spec.score} at the final step (curve every {spec.eval_every:,} steps)")


def _fmt(v: float | None, digits: int = 4) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def table_markdown(spec: SweepSpec, summary: dict) -> str:
    third, two = f"at {spec.steps // 3:,}", f"at {2 * spec.steps // 3:,}"
    lines = [f"Protocol: {summary['protocol']}.", "",
             f"| {spec.param} | 2-var share | {spec.score} mean | sd | per seed | {third} | {two} | converged | "
             "never bound |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in summary["rows"]:
        per = ", ".join(f"{k}: {_fmt(v)}" for k, v in r["per_seed"].items()) or "unfinished"
        conv = "—" if r["converged"] is None else ("yes" if r["converged"] else
                                                   f"no (+{r['max_rise_last_third']:.3f} in the last third)")
        unbound = ", ".join(f"seed {x}" for x in r.get("unbound_seeds", [])) or "—"
        lines.append(f"| {r['value']:.4g} | {_fmt(r['two_var_share'], 3)} | {_fmt(r['mean'])} | {_fmt(r['sd'])} | "
                     f"{per} | {_fmt(r['at_third'])} | {_fmt(r['at_two_thirds'])} | {conv} | {unbound} |")
    lines += ["", *threshold_lines(spec, summary)]
    return "\n".join(lines) + "\n"


def threshold_lines(spec: SweepSpec, summary: dict) -> list[str]:
    thr, conv = summary["threshold"], summary["convergence"]
    level = f"{thr['level']:.0%}"
    out = []
    if thr["estimate"] is None:
        out.append(f"Threshold: the monotone fit of the mean never reaches {level} ({thr['method']}).")
    else:
        out.append(f"Threshold (smallest {spec.param} from which the monotone fit of the mean stays ≥ {level}): "
                   f"**{thr['estimate']:.4g}** [{_fmt(thr['low'], 4)}, {_fmt(thr['high'], 4)}] ({thr['method']}; "
                   f"{thr['no_crossing_share']:.0%} of replicates never reach {level}).")
    out.append(f"Logistic with free asymptotes (scipy curve_fit): crossing {_fmt(thr['logistic'], 4)} "
               f"[{_fmt(thr['logistic_low'], 4)}, {_fmt(thr['logistic_high'], 4)}]"
               + (f", asymptotes {thr['fit']['lo']:.3f}–{thr['fit']['hi']:.3f}." if thr["fit"] else "."))
    if spec.paper_threshold is not None:
        out.append(f"Paper: {spec.paper_threshold}.")
    if conv["unconverged_near"]:
        out.append(f"Not converged at {spec.steps:,} steps near the threshold: {spec.param} = "
                   f"{', '.join(f'{v:.4g}' for v in conv['unconverged_near'])} still rose by more than "
                   f"{conv['margin']} over the last third.")
    elif conv["near_values"]:
        where = "near the threshold" if thr["estimate"] is not None else f"at the highest values below {level}"
        out.append(f"Converged {where} ({', '.join(f'{v:.4g}' for v in conv['near_values'])}): "
                   f"no rise above {conv['margin']} over the last third.")
    if ad := summary.get("adaptive"):
        out.append(f"Adaptive design: {ad['n_values']} of the grid's {ad['grid_size']} values run, in rounds of "
                   f"{', '.join(str(len(r)) for r in ad['rounds'])} values; {ad['steps_trained']:,} training steps "
                   f"against {ad['steps_full_grid']:,} for the full grid.")
    if summary["unfinished"]:
        out.append(f"Unfinished: {len(summary['unfinished'])} of {len(spec.points())} points "
                   "(run the same command again to finish them).")
    return out


def write_outputs(spec: SweepSpec, root: Path, summary: dict) -> None:
    """``sweep.json``, ``table.md``, ``figure.png|html`` (score vs value) and ``curves.png|html``."""
    from assign_add.charts import Line, render

    root = Path(root)
    atomic_write_json(root / "sweep.json", summary)
    atomic_write_text(root / "table.md", table_markdown(spec, summary))
    thr, xs = summary["threshold"], spec.values
    series = {f"seed {s}": [r["per_seed"].get(str(s)) for r in summary["rows"]] for s in spec.seeds}
    series["mean"] = [r["mean"] for r in summary["rows"]]
    if thr["monotone"]:
        mono = dict(zip(thr["monotone"]["x"], thr["monotone"]["y"]))
        series["monotone fit"] = [mono.get(x) for x in xs]
    if thr["fit"]:
        f = thr["fit"]
        series["logistic fit"] = list(logistic(np.asarray(xs, float), f["x0"], f["scale"], f["lo"], f["hi"]))
    markers = {}
    if thr["estimate"] is not None:
        markers[f"threshold {thr['estimate']:.3g}"] = thr["estimate"]
    if spec.paper_threshold is not None:
        markers[f"paper {spec.paper_threshold}"] = spec.paper_threshold
    clean = {k: [np.nan if v is None else v for v in vals] for k, vals in series.items()}
    render(Line(f"{spec.score} vs {spec.param} ({spec.steps:,} steps)", xs, clean, xlabel=spec.param,
                ylabel=spec.score, markers=markers, ylim=(0, 1.02)), root, "figure")
    _render_curves(spec, summary, root)


def _render_curves(spec: SweepSpec, summary: dict, root: Path) -> None:
    """Score against training step, one line per value (mean over seeds): is each point converged?"""
    from assign_add.charts import Line, render

    by_value: dict[float, dict[int, list[float]]] = {}
    for p in summary["points"]:
        for step, score in p["curve"]:
            by_value.setdefault(p["value"], {}).setdefault(step, []).append(score)
    if not by_value:
        return
    steps = sorted({s for d in by_value.values() for s in d})
    series = {f"{spec.param}={v:.3g}": [float(np.mean(d[s])) if s in d else np.nan for s in steps]
              for v, d in sorted(by_value.items())}
    marks = {"⅓": spec.steps // 3, "⅔": 2 * spec.steps // 3}
    render(Line(f"{spec.score} during training", steps, series, xlabel="step", ylabel=spec.score, markers=marks,
                ylim=(0, 1.02)), root, "curves")


def load_summary(folder: Path) -> dict:
    """A finished sweep's ``sweep.json`` (a one-line error if it is missing or unreadable)."""
    import json

    path = Path(folder) / "sweep.json"
    if not path.is_file():
        raise ConfigError(str(folder), "no sweep.json: run `assign-add sweep` into this folder first")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ConfigError(str(path), "corrupt (not JSON); re-run the sweep command to rewrite it") from None

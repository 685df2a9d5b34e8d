"""Phase timing over seeds (beyond the paper, which has one run): a distribution, and what predicts it.

From several runs' ``analysis.json`` (pure functions, no model):

- ``phase_table``: the addition, binding and refinement steps of every seed, with their summary;
- ``predictors``: for every progress measure of :mod:`assign_add.analysis.spike`, the step at which
  it has gone half of its own range and stays there (over the run's checkpoints; downwards for a
  measure that ends below where it began), and the Spearman rank correlation of that step with the binding step over seeds
  (with its p-value).  A measure counts as a *predictor* only when it crosses before the binding
  step in every seed; the best one is the predictor with the largest |ρ|.  The p-values are per
  measure: with ``len(MEASURES)`` measures tried, a Bonferroni reading multiplies them by that.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from assign_add.analysis.spike import MEASURES, measure_series
from assign_add.stats import kaplan_meier, km_median, spearman, wilson_interval

PHASES = ("addition", "binding", "refinement")
RANGE_FRACTION = 0.5  # the fraction of a measure's range whose first crossing is its "step"


@dataclass
class Predictor:
    measure: str
    label: str
    steps: list[int | None]  # per seed
    early_in_every_seed: bool  # before binding in every seed that bound (seeds that did not bind are not counted)
    rho: float | None
    p_value: float | None
    n: int = 0  # the seeds in the correlation (bound, with a crossing)
    p_method: str = ""  # "exact" (every permutation, n <= 9) or "t approximation"

    def to_json(self) -> dict:
        return asdict(self)


def phase_steps(analysis: dict) -> dict[str, int | None]:
    """Each phase's step, None where the phase did not happen: a run whose 1-var held-out accuracy
    never reached the binding level (criteria.BINDING_ACC) has no binding step, and then no
    refinement either."""
    d = analysis.get("dynamics", {})
    p = d.get("phases", {})
    out = {k: p.get(k) for k in PHASES}
    # binding time = the first step at which 1-var held-out accuracy reaches the binding level:
    # robust where the rise is gradual (the largest single rise can then be an early, small one)
    out["binding"] = p.get("binding_reached")
    if out["binding"] is None:
        out["refinement"] = None
    steps = d.get("steps") or []
    out["last_step"] = int(steps[-1]) if steps else None  # where a run that has not bound is censored
    return out


def binding_survival(per_seed: list[dict[str, int | None]]) -> dict | None:
    """Time to binding over seeds with the seeds that did not bind censored at their last step:
    the Kaplan–Meier curve and median, and how many bound by the (common) last step with a
    Wilson interval."""
    rows = [(s["binding"], True) if s["binding"] is not None else (s.get("last_step"), False) for s in per_seed]
    rows = [(t, e) for t, e in rows if t is not None]
    if not rows:
        return None
    times, observed = [t for t, _ in rows], [e for _, e in rows]
    curve = kaplan_meier(times, observed)
    ends = sorted({t for t, e in rows if not e})
    # "k of n bound by T" is known only up to the earliest end of watching an unbound run: a run
    # censored at 10,000 is not known to be unbound at 40,000.  A bound run limits nothing (bound
    # stays bound, and `survival` stops such a run soon after it binds), so T is the smallest last
    # step over the censored runs, or the last step watched when every run bound.
    horizon = min(ends) if ends else max([*times, *(s.get("last_step") or 0 for s in per_seed)])
    k, n = sum(1 for t, e in rows if e and t <= horizon), len(rows)
    low, high = wilson_interval(k, n)
    return {"n": n, "bound": k, "censored_at": ends, "horizon": horizon, "curve": curve,
            "median": km_median(curve), "bound_fraction": k / n, "bound_fraction_ci95": [low, high]}


def phase_table(analyses: list[dict]) -> dict:
    return summarize_phase_steps([phase_steps(a) for a in analyses])


def summarize_phase_steps(per_seed: list[dict[str, int | None]]) -> dict:
    """Each phase's distribution over seeds (the seeds without it counted missing) and the binding survival."""
    summary = {}
    for k in PHASES:
        vals = np.asarray([s[k] for s in per_seed if s[k] is not None], dtype=float)
        summary[k] = None if not len(vals) else {
            "n": int(len(vals)), "min": float(vals.min()), "median": float(np.median(vals)), "max": float(vals.max()),
            "mean": float(vals.mean()), "sd": float(vals.std(ddof=1)) if len(vals) > 1 else 0.0,
            "missing": len(per_seed) - int(len(vals))}
    return {"per_seed": per_seed, "summary": summary, "binding_survival": binding_survival(per_seed)}


def crossing_step(steps: list[int], values: list[float], level: float = RANGE_FRACTION) -> int | None:
    """First checkpoint from which the measure stays past ``level`` of its range, measured from its
    start side: ``≥ min + level·(max − min)`` for a measure that ends above where it began, ``≤ max −
    level·(max − min)`` for one that ends below (``=`` → right operand falls).  "Stays" makes early
    transients (attention at initialisation) not count.  None for a flat measure."""
    v = np.asarray(values, dtype=float)
    span = v.max() - v.min()
    if span <= 0:
        return None
    past = v >= v.min() + level * span if v[-1] >= v[0] else v <= v.max() - level * span
    fails = np.nonzero(~past)[0]
    first = 0 if not len(fails) else int(fails[-1]) + 1
    return int(steps[first]) if first < len(steps) else None


def predictors(analyses: list[dict]) -> list[Predictor]:
    binding = [phase_steps(a)["binding"] for a in analyses]
    series = [measure_series(a) for a in analyses]
    out = []
    for _, key, label in MEASURES:
        steps = [crossing_step(*s[key][1:]) if key in s else None for s in series]
        bound = [(x, b) for x, b in zip(steps, binding) if b is not None]  # seeds that reached binding
        pairs = [(x, b) for x, b in bound if x is not None]
        early = len(pairs) >= 1 and len(pairs) == len(bound) and all(x < b for x, b in pairs)
        rho, p, how = spearman([x for x, _ in pairs], [b for _, b in pairs])
        out.append(Predictor(key, label, steps, early, rho, p, len(pairs), how if p is not None else ""))
    return out


def best_predictor(preds: list[Predictor]) -> Predictor | None:
    usable = [p for p in preds if p.early_in_every_seed and p.rho is not None]
    return max(usable, key=lambda p: abs(p.rho), default=None)


def timing(analyses: list[dict], reference: dict | None = None) -> dict:
    """Everything the report and ``timing.json`` need; ``reference`` is the released run's analysis."""
    preds = predictors(analyses)
    best = best_predictor(preds)
    return {"phases": phase_table(analyses), "reference": phase_steps(reference) if reference else None,
            "level": RANGE_FRACTION, "predictors": [p.to_json() for p in preds], "best": best.to_json() if best else None,
            "measures_tried": len(MEASURES)}


def ecdf(per_seed: list[dict[str, int | None]]) -> tuple[list[float], dict[str, list[float]]]:
    """Each phase's empirical CDF over all seeds (a seed without the phase never counts, so with a
    common last step this is 1 − Kaplan–Meier), on the union of the observed steps."""
    xs = sorted({s[k] for s in per_seed for k in PHASES if s[k] is not None})
    out = {}
    for k in PHASES:
        vals = np.asarray([s[k] for s in per_seed if s[k] is not None])
        if len(vals):
            out[k] = [float((vals <= x).sum() / len(per_seed)) for x in xs]
    return [float(x) for x in xs], out


def survey(runs: dict[str, list[dict]]) -> dict:
    """Phase steps of many runs straight from their accuracy records (``metrics.jsonl``), no
    analysis needed: per run the addition, binding and refinement steps (binding censored at the
    run's last step when it never reached the level), and the binding survival over the runs.
    ``runs`` maps a name to that run's records."""
    from assign_add.analysis.dynamics import curves_from_records, detect_phases

    per_run = {}
    for name, records in runs.items():
        curves = curves_from_records(records)
        phases = detect_phases(curves)
        row = phase_steps({"dynamics": {"phases": phases.to_json(), "steps": curves.steps}})
        row["spike"] = None if phases.binding is None else [phases.binding_from, phases.binding_to]
        per_run[name] = row
    summary = summarize_phase_steps(list(per_run.values()))
    return {"per_run": per_run, "summary": summary["summary"], "binding_survival": summary["binding_survival"]}
